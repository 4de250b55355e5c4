"""A TensorFlow checkpoint written by one process, or together by every process of a job.

Design note
-----------
What it follows: TensorFlow's sharded checkpoints (``Saver(sharded=True)``): one data
file per writer, ``prefix.data-0000k-of-0000n``, and one index naming for each tensor the
file (``shard_id``), offset, size and CRC32C of its bytes.  A tensor that no one process
holds whole is stored as slices (``_tf_slices``), each written by a process that holds
it; TensorFlow reads a variable stored so as it reads a partitioned one's slices.
TensorFlow's ``Saver``, ``tf.train.load_checkpoint`` and ``restore_tf_checkpoint`` read
the result.

How a save goes, every process of the job calling :func:`write_bundle` with the same
tensors (the same script runs on every host):

1. The plan, the same on every process, from the tensors' shardings alone: each tensor is
   one piece where one process holds all of it, else the distinct boxes its sharding
   gives; a ``partitions`` split cuts them further.  A process's own copy (a fully
   addressable array, a NumPy value) is held by every process.  Each piece goes to one
   of the processes holding it, the bytes spread evenly over them.
2. Process 0 takes the prefix's lock (``_tf_files.locked``) and removes leftovers; then
   the plans, and the CRC32C of each process's own copies, are exchanged: plans that
   differ (the processes save different states) or own copies that differ (a value made
   otherwise on one host) are refused on every process before anything is written.
3. Each process writes its pieces, one tensor at a time, into a temporary data file.
4. The entries (or a process's error) are exchanged; process 0 writes the index, renames
   every data file and then the index into place (``_tf_files.replace``), makes it the
   latest checkpoint and releases the lock.
5. Its outcome is exchanged: every process returns once the checkpoint is whole, or
   raises (a process's own error, or on the others a ``RuntimeError`` naming it).

A process killed at any step leaves the checkpoint there was (only step 4 renames, in
one process, with ``_tf_files``' guarantee); the others wait in the next exchange until
the job's coordinator ends them.  In one process nothing is exchanged and the checkpoint
has one data file, ``-00000-of-00001``: byte for byte what a ``Saver`` writes.

What it assumes: the processes share the directory, as TensorFlow's sharded save
assumes; a value spread over processes is made (``Tensor.make``) by every process, in
the same order, as a computation of the job may need.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import NamedTuple

import numpy as np

from funcgrad.train.checkpoints import _processes
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.checkpoints import _tf_files
from funcgrad.train.checkpoints import _tf_proto
from funcgrad.train.checkpoints import _tf_slices
from funcgrad.train.checkpoints._crc32c import crc32c
from funcgrad.train.checkpoints._processes import Box

_AGREE = "every process must save the same state, optimizer and arguments"


class Tensor(NamedTuple):
    """A tensor to write: ``held`` gives its shape, dtype and where it is; ``make()`` makes
    its value when it is written (``None``: ``held`` is the value); stored as ``dtype``
    (``None``: ``held``'s)."""

    held: Any
    make: Callable[[], Any] | None = None
    dtype: Any = None

    def stored(self) -> np.dtype:
        """The dtype the checkpoint holds it in."""
        if self.dtype is not None:
            return np.dtype(self.dtype)
        return np.dtype(getattr(self.held, "dtype", None) or np.asarray(self.held).dtype)


class _Piece(NamedTuple):
    box: Box | None  # None: all of the tensor, in one entry under its name
    writer: int


def write_bundle(
    prefix: str,
    tensors: Mapping[str, Tensor | np.ndarray],
    partitions: Mapping[str, int] | None = None,
    *,
    latest: bool = False,
    caller: str = "",
) -> None:
    """Write ``tensors`` (numeric or bool, by non-empty name; an array, or a
    :class:`Tensor`) as the checkpoint ``prefix``, each that ``partitions`` names in that
    many slices as a partitioned variable; from one process, or from every process of a
    job together (the design note).  ``latest``: also name it in the ``checkpoint`` file.
    The data are written in the order of the names, a tensor's slices in their order at
    its name's place, as TensorFlow's ``Saver`` writes them.  Errors start with
    ``caller``."""
    given = {name: t if isinstance(t, Tensor) else Tensor(t) for name, t in tensors.items()}
    plan, sliced = _plan(given, dict(partitions or {}))
    me, n = _processes.index(), _processes.count()
    index = prefix + ".index"
    paths = [_tf_bundle.data_path(prefix, k, n) for k in range(n)]
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    with _tf_files.locked(prefix) if me == 0 else contextlib.nullcontext():
        error = _attempt(lambda: _tf_files.remove_leftovers(prefix, [index, *paths]), me == 0)
        views = _exchange(caller, _fingerprint(given, plan) if n > 1 else None, error)
        _check_agreement(caller, views)
        temporary, error = None, None
        entries: list[tuple[bytes, bytes]] = []
        try:
            temporary, entries = _tf_bundle.write_data(paths[me], _pieces(given, plan, me), me)
        except Exception as failure:
            error = failure
        try:
            written = _exchange(
                caller, [temporary, [[k.hex(), e.hex()] for k, e in entries]], error
            )
        except BaseException:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
            raise
        error = _attempt(lambda: _commit(prefix, paths, written, sliced, given, latest), me == 0)
        _exchange(caller, None, error)


def _attempt(step: Callable[[], None], here: bool) -> Exception | None:
    """Run ``step`` where ``here``; the error it raised, to be shared, or ``None``."""
    try:
        if here:
            step()
    except Exception as error:
        return error
    return None


def _exchange(caller: str, payload: Any, error: Exception | None) -> list[Any]:
    """Every process's ``payload``; raised on every process instead where any had an
    error: its own where it had one, else a ``RuntimeError`` naming the process."""
    shared = None if error is None else f"{type(error).__name__}: {error}"
    found = _processes.exchange_json([shared, payload])
    if error is not None:
        raise error
    for k, (text, _) in enumerate(found):
        if text is not None:
            raise RuntimeError(
                f"{caller}: process {k} of the job could not save its part ({text}); "
                "nothing was saved — fix the cause there and save again."
            )
    return [payload for _, payload in found]


def _plan(
    tensors: Mapping[str, Tensor], partitions: Mapping[str, int]
) -> tuple[dict[str, list[_Piece]], dict[str, list[Box]]]:
    """Each tensor's pieces and their writers, and the slices of each tensor stored as
    slices (the design note's step 1)."""
    n = _processes.count()
    found: list[tuple[str, Box | None, tuple[int, ...], int]] = []
    sliced: dict[str, list[Box]] = {}
    for name in sorted(tensors):
        held, itemsize = tensors[name].held, tensors[name].stored().itemsize
        shape = tuple(np.shape(held))
        whole = tuple((0, d) for d in shape)
        by_box = _processes.holders(held) if _processes.spread(held) else {whole: tuple(range(n))}
        everywhere = set.intersection(*(set(p) for p in by_box.values()))
        if everywhere:  # one process holds it all: one piece, or its partitions
            by_box = {whole: tuple(sorted(everywhere))}
        if name in partitions:
            parts = _tf_slices.partition(shape, partitions[name])
            pieces = [
                (p if b == whole else _processes.overlap(p, b), holders)
                for p in parts
                for b, holders in by_box.items()
                if b == whole or _processes.overlap(p, b) is not None
            ]
        else:
            pieces = [(None if b == whole else b, holders) for b, holders in by_box.items()]
        if any(box is not None for box, _ in pieces):
            sliced[name] = [box for box, _ in pieces if box is not None]
        for box, holders in pieces:
            size = math.prod(stop - start for start, stop in box or whole) * itemsize
            found.append((name, box, holders, size))
    load = [0] * n
    plan: dict[str, list[_Piece]] = {name: [] for name in tensors}
    writers = {}
    for name, box, holders, size in sorted(found, key=lambda f: -f[3]):  # stable: by name
        writer = min(holders, key=lambda k: (load[k], k))
        load[writer] += size
        writers[name, box] = writer
    for name, box, _, _ in found:
        plan[name].append(_Piece(box, writers[name, box]))
    return plan, sliced


def _fingerprint(tensors: Mapping[str, Tensor], plan: Mapping[str, list[_Piece]]) -> list[Any]:
    """What every process must agree on: each tensor's dtype, shape and pieces, and the
    CRC32C of this process's own copy where it has one."""
    out = []
    for name in sorted(tensors):
        held = tensors[name].held
        own = None if _processes.spread(held) else crc32c(np.ascontiguousarray(held))
        pieces = [[p.box, p.writer] for p in plan[name]]
        out.append([name, tensors[name].stored().name, list(np.shape(held)), pieces, own])
    return out


def _check_agreement(caller: str, views: list[Any]) -> None:
    """Refuse, on every process alike, plans that differ or own copies that differ."""
    if len(views) == 1:
        return
    first = views[0]
    for k, view in enumerate(views[1:], 1):
        for mine, theirs in zip(first, view, strict=False):
            if mine[:4] != theirs[:4]:
                raise ValueError(
                    f"{caller}: process {k} saves {theirs[0]!r} as {theirs[1]}{theirs[2]}, "
                    f"process 0 {mine[0]!r} as {mine[1]}{mine[2]} (or spread otherwise); "
                    f"{_AGREE}. Nothing was written."
                )
        if len(view) != len(first):
            raise ValueError(
                f"{caller}: process {k} saves {len(view)} tensors, process 0 {len(first)}; "
                f"{_AGREE}. Nothing was written."
            )
    for mine, *theirs in zip(*views, strict=True):
        differ = [k for k, t in enumerate(theirs, 1) if t[4] != mine[4]]
        if differ:
            raise ValueError(
                f"{caller}: {mine[0]!r} differs between process 0 and process {differ[0]}, "
                "each of which holds its own copy (an array on its own devices only); make "
                "it one global array (jax.device_put(x, NamedSharding(mesh, P())) or a "
                "jitted step's output), or give every process the same value. Nothing was "
                "written."
            )


def _pieces(
    tensors: Mapping[str, Tensor], plan: Mapping[str, list[_Piece]], me: int
) -> Iterator[tuple[bytes, np.ndarray]]:
    """This process's pieces, key and data, in the order of the names; a tensor's value
    made once, when its pieces are written (one spread over processes by every process)."""
    for name in sorted(tensors):
        tensor = tensors[name]
        mine = [p for p in plan[name] if p.writer == me]
        if not mine and not _processes.spread(tensor.held):
            continue
        value = tensor.held if tensor.make is None else tensor.make()
        for piece in mine:
            key = name.encode() if piece.box is None else _tf_slices.box_key(name, piece.box)
            yield key, _host(value, piece.box, tensor.stored())
        del value


def _host(value: Any, box: Box | None, dtype: np.dtype) -> np.ndarray:
    """The values of ``box`` of ``value`` (all of it where ``None``) on the host, as
    ``dtype``: from this process's shards where ``value`` is spread over processes."""
    if not _processes.spread(value):
        array = np.asarray(value, dtype)
        return array if box is None else array[_processes.slices(box)]
    want = box if box is not None else tuple((0, d) for d in value.shape)
    local = list(_processes.local(value))
    for have, data in local:  # one shard holds it: no copy on a CPU
        if _processes.overlap(have, want) == want:
            return np.asarray(np.asarray(data)[_processes.within(want, have)], dtype)
    out = np.empty([stop - start for start, stop in want], dtype)
    for have, data in local:
        shared = _processes.overlap(have, want)
        if shared is not None:
            out[_processes.within(shared, want)] = np.asarray(data)[_processes.within(shared, have)]
    return out


def _commit(
    prefix: str,
    paths: list[str],
    written: list[Any],
    sliced: Mapping[str, list[Box]],
    tensors: Mapping[str, Tensor],
    latest: bool,
) -> None:
    """Process 0's step 4: the index of every process's entries, and the renames."""
    temporaries = {path: temporary for path, (temporary, _) in zip(paths, written, strict=True)}
    entries = [(bytes.fromhex(k), bytes.fromhex(e)) for _, pairs in written for k, e in pairs]
    for name, boxes in sliced.items():
        tensor = tensors[name]
        dtype = _tf_proto.ENUMS[tensor.stored().newbyteorder("<")]
        entries.append((name.encode(), _tf_slices.full_entry(dtype, np.shape(tensor.held), boxes)))
    try:
        table = _tf_bundle.index_table(len(paths), entries)
        new_index = _tf_files.temporary(prefix + ".index", [table])
    except BaseException:
        for temporary in temporaries.values():
            Path(temporary).unlink(missing_ok=True)
        raise
    _tf_files.replace(prefix, new_index, temporaries)
    if latest:
        _tf_bundle.write_checkpoint_state(prefix)
