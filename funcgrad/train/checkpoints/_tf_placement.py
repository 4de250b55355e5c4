"""A tensor of a TensorFlow checkpoint read into the layout of a template, whatever the
layout it was saved from.

Design note
-----------
What it follows: where a template array lies (``jax.Array.addressable_shards``: this
process's devices, each with a box of the array) and where the checkpoint stores the
tensor (``BundleReader.pieces``: one entry of all of it, or slices — a partitioned
variable's, or the boxes a job's processes wrote).

What it does: a template that this process holds whole (one process, or a process's own
copy in a job) takes the tensor read whole, as before.  For a template spread over the
processes of a job, each process fills only the boxes its devices hold: a stored piece
that is one of its boxes is read into place; any other that meets them is read in runs
of rows (``BundleReader.chunks``), what its boxes need copied and the rest dropped; each
piece's CRC32C is checked over all its bytes (so each process verifies every byte it
keeps); then it makes the global array from its devices' buffers
(``jax.make_array_from_single_device_arrays``), on the template's sharding; on a CPU the
devices take the buffers over (64-byte aligned, as ``BundleReader.read``'s).  Memory:
this process's boxes and one run (16 MiB).  A
checkpoint saved by a job of the same layout has one piece per box, so each process reads
its own; one saved by a single process is read whole by every process (its CRC32C covers
all of it), each keeping its part.

What it assumes: the pieces were checked to cover the tensor exactly
(``_tf_slices.boxes``) and the template has the checkpoint's dtype and shape
(``_tf_layout``); every process calls it for the same tensors in the same order (making a
global array is an operation of the job).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from funcgrad.train.checkpoints import _processes
from funcgrad.train.checkpoints._tf_bundle import BundleReader
from funcgrad.train.checkpoints._tf_bundle import aligned


def read(reader: BundleReader, name: str, like: Any) -> np.ndarray | jax.Array:
    """The tensor ``name`` of ``reader``: a NumPy array, or where ``like`` is spread over
    processes, a global array on ``like``'s sharding (the design note)."""
    if not _processes.spread(like):
        return reader.read(name)
    where = f"{reader.index} [{name!r}]"
    shape = reader.entries[name].shape
    mine: dict[_processes.Box, np.ndarray] = {}
    dtype = np.dtype(like.dtype)
    for box, _ in _processes.local(like):  # memory a CPU device takes over, not a copy
        extent = [stop - start for start, stop in box]
        mine[box] = aligned(math.prod(extent) * dtype.itemsize).view(dtype).reshape(extent)
    for stored, entry in reader.pieces(name, where):
        wanted = [box for box in mine if _processes.overlap(box, stored) is not None]
        if not wanted:  # another process's
            continue
        if wanted == [stored]:  # a slice this process holds as it is: read into place
            reader.read_into(entry, where, name, mine[stored])
            continue
        for first, rows in reader.chunks(entry, where, name):
            start = stored[0][0] + first if shape else 0  # a scalar: one run, box ()
            run = ((start, start + len(rows)), *stored[1:]) if shape else ()
            for box in wanted:
                shared = _processes.overlap(box, run)
                if shared is not None:
                    mine[box][_processes.within(shared, box)] = rows[_processes.within(shared, run)]
    arrays, given = [], set()
    for shard in like.addressable_shards:  # a box on several devices: a copy for each other
        box = _processes.box_of(shard.index, shape)
        arrays.append(
            jax.device_put(mine[box] if box not in given else mine[box].copy(), shard.device)
        )
        given.add(box)
    return jax.make_array_from_single_device_arrays(shape, like.sharding, arrays)
