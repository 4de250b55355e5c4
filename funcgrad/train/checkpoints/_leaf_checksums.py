"""The checksum ``Checkpointer`` records with each leaf of a state, and checks on restore.

Design note
-----------
What it records: for every leaf, the CRC-32C of its bytes in C order, little-endian (a
PRNG key's data), whatever its layout.  A leaf this process holds whole: computed on the
host, at the speed the CPU's CRC32 instruction reads memory (a CPU array is read where it
is; an accelerator's is copied to the host alone).  A leaf spread over the processes of a
job: each process computes the share of the boxes it is first to hold (``_processes``) in
the CRC — the raw register of the leaf's bytes with every byte outside the box zero
(``_crc32c.raw`` of the box's runs of bytes, moved to their places with
``_crc32c.shift``) — and the shares, exchanged, XOR to the leaf's
(``_crc32c.finish``).  No byte leaves the process that holds it, and the record is the
same for any layout: a state saved by a job restores into one process, and back.  In a
job, the CRCs of a leaf each process holds a copy of (``opt.init(params)`` of params built
on each host) are compared across processes: copies that differ are refused.

What it checks: a restored leaf, its CRC-32C recomputed where it lies.  For a leaf spread
over processes, each process computes the share of every box it holds, and the shares are
exchanged: each process's shares, completed with the first holders' shares of the boxes it
lacks, must give the record, so a replica read wrongly on one host is found.  The verdict
is exchanged too: every process raises, or none.

Steps saved before the CRC record have, for every leaf, a pair of 32-bit sums computed by
XLA on the devices that hold it (:func:`_sums`): each element's bits as 32-bit words mixed
with their position by MurmurHash3's finaliser and summed modulo 2**32, twice with
different seeds — a value that does not depend on the sharding.  They are still checked.

What it assumes: every process calls :func:`record` and :func:`damaged` with the same
leaves, in the same order (``_processes``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad.train.checkpoints import _crc32c
from funcgrad.train.checkpoints import _processes
from funcgrad.train.checkpoints._processes import Box

_SEEDS = (0x9E3779B9, 0x7F4A7C15)
#: The bytes of zeros and data put together at a time, for a box that is not one run.
_CHUNK = 1 << 24


def record(caller: str, paths: list[str], leaves: list[Any]) -> list[int]:
    """Each leaf's CRC-32C (the design note); in a job, the same list on every process,
    or a ``ValueError`` on every process where copies of a leaf differ between them."""
    leaves = [_keyless(leaf) for leaf in leaves]
    crcs: list[int | None] = []
    shares: dict[int, int] = {}
    for i, leaf in enumerate(leaves):
        if not _processes.spread(leaf):
            crcs.append(_crc(leaf))
            continue
        crcs.append(None)
        owned = _processes.holders(leaf)
        register = 0
        for box, data in _processes.local(leaf):
            if owned[box][0] == _processes.index():
                register ^= _share(leaf.shape, box, np.asarray(data))
        shares[i] = register
    if _processes.count() == 1:
        return [c for c in crcs if c is not None]
    views = _processes.exchange_json([crcs, shares])
    for i, leaf in enumerate(leaves):
        if crcs[i] is None:
            register = 0
            for _, theirs in views:
                register ^= theirs[str(i)]
            crcs[i] = _crc32c.finish(register, leaf.size * leaf.dtype.itemsize)
        else:
            differ = [k for k, (theirs, _) in enumerate(views) if theirs[i] != views[0][0][i]]
            if differ:
                raise ValueError(
                    f"{caller}: {paths[i]} differs between process 0 and process {differ[0]}, "
                    "each of which holds its own copy (an array on its own devices only, as "
                    "opt.init makes of params built on each host); give every process the "
                    "same value, or make it one global array. Nothing was written."
                )
    return [c for c in crcs if c is not None]


def damaged(wanted: list[Any], leaves: list[Any]) -> list[int]:
    """The positions of the leaves whose data do not match their record (a CRC-32C, or an
    older pair of sums); in a job, the same list on every process."""
    leaves = [_keyless(leaf) for leaf in leaves]
    bad: set[int] = set()
    shares: dict[int, dict[str, int]] = {}
    older: list[int] = []
    for i, (want, leaf) in enumerate(zip(wanted, leaves, strict=True)):
        if isinstance(want, list):
            older.append(i)
        elif not _processes.spread(leaf):
            if _crc(leaf) != want:
                bad.add(i)
        else:
            shares[i] = {
                json.dumps(box): _share(leaf.shape, box, np.asarray(data))
                for box, data in _processes.local(leaf)
            }
    for group in (
        [i for i in older if _processes.spread(leaves[i])],
        [i for i in older if not _processes.spread(leaves[i])],
    ):
        sums = _sums([leaves[i] for i in group]) if group else []
        bad.update(i for i, s in zip(group, sums, strict=True) if s.tolist() != wanted[i])
    if _processes.count() > 1:
        views = _processes.exchange_json([sorted(bad), shares])
        bad = {i for theirs, _ in views for i in theirs}
        for i in shares:  # the same leaves on every process
            if not _complete(wanted[i], leaves[i], [theirs[str(i)] for _, theirs in views]):
                bad.add(i)
    return sorted(bad)


def _complete(want: int, leaf: jax.Array, shares: list[dict[str, int]]) -> bool:
    """Whether each process's ``shares`` of ``leaf``'s boxes, completed with the first
    holder's of the boxes it lacks, give the CRC-32C ``want``."""
    owners = {json.dumps(box): held[0] for box, held in _processes.holders(leaf).items()}
    for mine in shares:
        register = 0
        for box, owner in owners.items():
            register ^= mine[box] if box in mine else shares[owner][box]
        if _crc32c.finish(register, leaf.size * leaf.dtype.itemsize) != want:
            return False
    return True


def _keyless(leaf: Any) -> Any:
    """A leaf as an array of numbers: a PRNG key array as its data."""
    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(leaf)
    return leaf


def _crc(leaf: Any) -> int:
    """The CRC-32C of a leaf this process holds whole (a CPU array is not copied)."""
    host = np.asarray(leaf, order="C")
    return _crc32c.crc32c(np.asarray(host, host.dtype.newbyteorder("<")))


def _share(shape: tuple[int, ...], box: Box, data: np.ndarray) -> int:
    """The share of ``box`` of an array of ``shape`` (holding ``data``) in its CRC-32C:
    the raw register of the array's bytes with every byte outside the box zero."""
    data = np.ascontiguousarray(data, data.dtype.newbyteorder("<"))
    item, size = data.dtype.itemsize, math.prod(shape) * data.dtype.itemsize
    register, position = 0, 0
    for start, run in _runs(shape, box, data.reshape(-1).view(np.uint8), item):
        register = _crc32c.raw(run, _crc32c.shift(register, start - position))
        position = start + run.size
    return _crc32c.shift(register, size - position)


def _runs(
    shape: tuple[int, ...], box: Box, raw: np.ndarray, item: int
) -> Iterator[tuple[int, np.ndarray]]:
    """``(offset, bytes)``: the box's bytes in the array's, in order, as runs to feed the
    CRC; where the box's rows are short, several rows at a time with the zeros between
    them (at most :data:`_CHUNK` bytes)."""
    partial = [k for k, (b, d) in enumerate(zip(box, shape, strict=True)) if b != (0, d)]
    if not partial:  # all of it
        yield 0, raw
        return
    k = partial[-1]  # from the next axis on, the box holds whole rows: runs of bytes
    inner = math.prod(shape[k + 1 :]) * item
    stride, (begin, end) = shape[k] * inner, box[k]
    length = (end - begin) * inner
    grids = np.meshgrid(*(np.arange(s, e) for s, e in box[:k]), indexing="ij")
    outer = (
        np.ravel_multi_index([g.reshape(-1) for g in grids], shape[:k]) if k else np.zeros(1, int)
    )
    rows = raw.reshape(len(outer), length)
    step = max(1, _CHUNK // stride)
    breaks = np.flatnonzero(np.diff(outer) != 1) + 1
    for first, last in zip([0, *breaks], [*breaks, len(outer)], strict=True):
        if k == 0 or stride > _CHUNK:  # runs far apart, or rows too long to pad: one each
            for r in range(first, last):
                yield int(outer[r]) * stride + begin * inner, rows[r]
            continue
        for r in range(first, last, step):
            stop = min(last, r + step)
            padded = np.zeros((stop - r, stride), np.uint8)
            padded[:, begin * inner : begin * inner + length] = rows[r:stop]
            yield int(outer[r]) * stride, padded.reshape(-1)


def _mix(h: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser, a bijection of ``uint32``."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _words(x: jax.Array) -> jax.Array:
    """The bits of ``x`` as a flat ``uint32`` array (narrow types widened, wide ones split)."""
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        x = jnp.stack([x.real, x.imag], axis=-1)
    unsigned = {1: jnp.uint8, 2: jnp.uint16}.get(x.dtype.itemsize, jnp.uint32)
    return jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32).ravel()


@jax.jit
def _sums(leaves: list[jax.Array]) -> list[jax.Array]:
    """A ``uint32[2]`` checksum of each leaf's bits and their positions: the record of
    steps saved before the CRC-32C one (the design note)."""
    sums = []
    for leaf in leaves:
        words = _words(leaf)
        position = jnp.arange(words.size, dtype=jnp.uint32)
        sums.append(
            jnp.stack(
                [
                    jnp.sum(_mix(words ^ _mix(position ^ jnp.uint32(s))), dtype=jnp.uint32)
                    for s in _SEEDS
                ]
            )
        )
    return sums
