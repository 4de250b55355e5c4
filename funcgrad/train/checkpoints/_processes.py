"""The processes of a ``jax.distributed`` job, as a checkpoint sees them.

Design note
-----------
What it follows: JAX's multi-controller model.  Every process runs the same program, so
every process calls a save or a restore, in the same order.  An array's sharding tells
every process the same thing: which device, and so which process, holds which box of the
array (``Sharding.devices_indices_map``).  An array all of whose devices are this
process's (``is_fully_addressable``) is, in a job of several processes, this process's
own copy — what ``opt.init(params)`` makes of params built on each host — and so are a
NumPy value and a Python number: every process holds one, and nothing but the program
says they are equal.

What it gives: :func:`exchange`, every process's bytes in process order, gathered by
``jax.experimental.multihost_utils.process_allgather`` (a collective over every device: it
returns once every process has called it, so it is a barrier too; payloads are padded to a
power of two, so few shapes are compiled); :func:`holders`, the distinct boxes of an array
and the processes that hold each; :func:`local`, this process's boxes of an array with
their data; :func:`replicated`, a process's own copy made one global array, replicated on
every device of the job (what orbax writes).  In one process nothing is exchanged and
nothing compiled.

What it assumes: every process calls :func:`exchange` as often, in the same order (a
program whose processes diverge waits in the collective, as JAX's own collectives do); a
process that dies leaves the others waiting there until the job's coordinator ends them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec

#: ``(start, stop)`` per dimension: a box of an array.
Box = tuple[tuple[int, int], ...]


def count() -> int:
    """The number of processes of the job (1 without ``jax.distributed``)."""
    return jax.process_count()


def index() -> int:
    """This process's index in the job."""
    return jax.process_index()


def exchange(payload: bytes) -> list[bytes]:
    """Every process's ``payload``, in process order; called by every process."""
    n = jax.process_count()
    if n == 1:
        return [payload]
    sizes = np.asarray(multihost_utils.process_allgather(np.array([len(payload)], np.int32)))
    sizes = sizes.reshape(n)
    width = 1 << max(6, int(sizes.max()).bit_length())
    buf = np.zeros(width, np.uint8)
    buf[: len(payload)] = np.frombuffer(payload, np.uint8)
    rows = np.asarray(multihost_utils.process_allgather(buf)).reshape(n, width)
    return [rows[k, : sizes[k]].tobytes() for k in range(n)]


def exchange_json(value: Any) -> list[Any]:
    """Every process's ``value`` (a JSON-able one), in process order."""
    return [json.loads(raw) for raw in exchange(json.dumps(value).encode())]


def spread(value: Any) -> bool:
    """Whether ``value`` is one global array over several processes (not this one's own)."""
    return isinstance(value, jax.Array) and not value.is_fully_addressable


def box_of(index: tuple[slice, ...], shape: tuple[int, ...]) -> Box:
    """The box a shard's index (a tuple of slices) selects of an array of ``shape``."""
    return tuple(s.indices(d)[:2] for s, d in zip(index, shape, strict=True))


def overlap(a: Box, b: Box) -> Box | None:
    """The box two boxes share, or ``None`` (also where it would hold no value)."""
    shared = tuple((max(s, t), min(e, f)) for (s, e), (t, f) in zip(a, b, strict=True))
    return shared if all(start < stop for start, stop in shared) else None


def slices(box: Box) -> tuple[slice, ...]:
    """``box`` as a NumPy index."""
    return tuple(slice(start, stop) for start, stop in box)


def within(inner: Box, outer: Box) -> tuple[slice, ...]:
    """The NumPy index of ``inner`` in an array holding ``outer`` (which contains it)."""
    return tuple(slice(a - s, b - s) for (s, _), (a, b) in zip(outer, inner, strict=True))


def holders(array: jax.Array) -> dict[Box, tuple[int, ...]]:
    """Each distinct box of a global ``array``, sorted, with the processes holding it."""
    found: dict[Box, set[int]] = {}
    for device, where in array.sharding.devices_indices_map(array.shape).items():
        found.setdefault(box_of(where, array.shape), set()).add(device.process_index)  # type: ignore[attr-defined]
    return {box: tuple(sorted(found[box])) for box in sorted(found)}


def local(array: jax.Array) -> Iterator[tuple[Box, jax.Array]]:
    """Each distinct box of ``array`` this process holds, with one device's data of it."""
    seen = set()
    for shard in array.addressable_shards:
        box = box_of(shard.index, array.shape)
        if box not in seen:
            seen.add(box)
            yield box, shard.data


def replicated(value: Any) -> jax.Array:
    """This process's own copy of ``value`` as one global array on every device of the
    job, replicated (each process gives its copy; :func:`exchange` first to know they are
    equal).  A PRNG key array stays one."""
    is_key = isinstance(value, jax.Array) and jax.dtypes.issubdtype(
        value.dtype, jax.dtypes.prng_key
    )
    host = np.asarray(jax.random.key_data(value) if is_key else value)
    mesh = Mesh(np.array(jax.devices()), ("processes",))
    sharding = NamedSharding(mesh, PartitionSpec())
    made = jax.make_array_from_callback(host.shape, sharding, lambda where: host[where])
    return jax.random.wrap_key_data(made, impl=jax.random.key_impl(value)) if is_key else made
