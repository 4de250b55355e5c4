"""Partitioned variables in TensorFlow's tensor bundles: one tensor stored as slices.

Design note
-----------
What it follows: what TensorFlow 2.21's ``BundleWriter::AddSlice`` writes for a variable
made with a partitioner (``tf.compat.v1.fixed_size_partitioner``) and saved by a
``tf.compat.v1.train.Saver`` — the parts' ``save_slice_info`` names one tensor, and so do
the optimizer's slots of the parts (``W/Adam``):

* under the tensor's own name, an entry with its dtype, its full shape and one
  ``TensorSliceProto`` per slice (field 7: an extent per dimension, ``start`` left out
  when 0, ``length`` always written; an empty extent is a whole dimension) — no data;
* per slice, an ordinary entry with the slice's data, under the key
  ``checkpoint::EncodeTensorNameSlice`` makes: ``OrderedCode`` of 0, the name, the rank,
  then ``start`` and ``length`` of each dimension (``WriteSignedNumIncreasing``;
  ``length`` -1 for a whole dimension).  These keys start with a NUL byte, so they sort
  before every name.

What it reads: each slice key decoded into its name and extents, and the slices of a
tensor assembled into one array.  Refused, as damaged: a slice outside the tensor, of
another shape than its extents or of another dtype than the tensor (never cast), two
slices that overlap (TensorFlow's "Overlapping slices"), and slices that leave part of
the tensor uncovered.  What it writes: the entry and keys of any slices (``_tf_job``
chooses them: a tensor split along its first axis into ``n`` slices as
``fixed_size_partitioner(n)`` splits it, the first ``rows % n`` one row longer — byte for
byte what a ``Saver`` writes —, and the boxes of a tensor held by several processes),
every extent written as ``start`` and length, as TensorFlow's ``SaveSliceInfo`` spec does.

What it assumes: the keys come from an index whose CRC32C was verified; a malformed one
is still refused with the file's name, never read past its end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping

import numpy as np

from funcgrad._checks import as_int
from funcgrad.train.checkpoints import _tf_proto
from funcgrad.train.checkpoints._processes import Box
from funcgrad.train.checkpoints._processes import overlap
from funcgrad.train.checkpoints._processes import slices
from funcgrad.train.checkpoints._tf_files import damaged
from funcgrad.train.checkpoints._tf_proto import Entry

#: ``(start, length)`` per dimension of a slice; ``length`` -1 for a whole dimension.
Extents = tuple[tuple[int, int], ...]


def _signed(value: int) -> bytes:
    """``OrderedCode::WriteSignedNumIncreasing``: the length in the leading bits."""
    x = ~value if value < 0 else value
    length = x.bit_length() // 7 + 1
    raw = value & ((1 << (8 * length)) - 1)  # two's complement over ``length`` bytes
    header = ((1 << length) - 1) << (7 * length)
    return (raw ^ header).to_bytes(length, "big")


def slice_key(name: str, extents: Extents) -> bytes:
    """``checkpoint::EncodeTensorNameSlice(name, slice)``."""
    # OrderedCode escapes NUL as NUL 0xFF (and 0xFF, which UTF-8 never holds, as 0xFF NUL).
    text = name.encode().replace(b"\x00", b"\x00\xff")
    rank = len(extents).to_bytes(max(1, (len(extents).bit_length() + 7) // 8), "big")
    rank = bytes([len(rank)]) + rank if extents else b"\x00"
    tail = b"".join(_signed(start) + _signed(length) for start, length in extents)
    return b"\x00" + text + b"\x00\x01" + rank + tail


def _parse_key(key: bytes, where: str) -> tuple[str, Extents]:
    """The name and extents of a slice key (the inverse of :func:`slice_key`)."""
    bad = damaged(where, "a malformed slice key")
    end = key.find(b"\x00\x01", 1)
    if key[:1] != b"\x00" or end < 0:
        raise bad
    text = key[1:end].replace(b"\x00\xff", b"\x00")
    pos = end + 2
    if pos >= len(key) or pos + 1 + key[pos] > len(key):
        raise bad
    rank = int.from_bytes(key[pos + 1 : pos + 1 + key[pos]], "big")
    pos += 1 + key[pos]
    numbers = []
    for _ in range(2 * rank):
        if pos >= len(key):
            raise bad
        flip = 0 if key[pos] & 0x80 else 0xFF  # a negative number: its bits inverted
        head = (key[pos] ^ flip) << 8 | ((key[pos + 1] ^ flip) if pos + 1 < len(key) else 0)
        length = 16 - (~head & 0xFFFF).bit_length()  # the leading ones
        if not 1 <= length <= 10 or pos + length > len(key):
            raise bad
        raw = int.from_bytes(bytes(b ^ flip for b in key[pos : pos + length]), "big")
        x = raw & ((1 << (7 * length)) - 1)
        numbers.append(~x if flip else x)
        pos += length
    if pos != len(key):
        raise bad
    return text.decode("utf-8", "replace"), tuple(zip(numbers[::2], numbers[1::2], strict=True))


def add(
    slices: dict[str, list[tuple[Extents, Entry]]], key: bytes, value: bytes, where: str
) -> None:
    """Record the slice entry ``value`` stored under ``key``, by the tensor it is part of."""
    name, extents = _parse_key(key, where)
    slices.setdefault(name, []).append((extents, _tf_proto.parse_entry(value, where)))


def boxes(full: Entry, parts: list[tuple[Extents, Entry]], where: str) -> list[tuple[Box, Entry]]:
    """The slices of a tensor whose whole is ``full``, each as the box it fills, sorted;
    refused unless each lies inside the tensor with the slice's shape and the tensor's
    dtype, no two overlap (TensorFlow's ``TensorSliceSet``: "Overlapping slices") and
    together they cover it."""
    shape, found = full.shape, []
    for extents, entry in parts:
        if len(extents) != len(shape) or any(
            s < 0 or (n >= 0 and s + n > d) for (s, n), d in zip(extents, shape, strict=True)
        ):
            raise damaged(where, f"a slice {extents} outside the shape {shape}")
        box = tuple(
            (s, s + n) if n >= 0 else (0, d) for (s, n), d in zip(extents, shape, strict=True)
        )
        want = tuple(stop - start for start, stop in box)
        if entry.shape != want:
            raise damaged(where, f"a slice of shape {entry.shape} where {want} is stored")
        if entry.dtype != full.dtype:
            stored, whole = (_dtype_name(e.dtype) for e in (entry, full))
            raise damaged(where, f"a slice stored as {stored} in a {whole} tensor")
        found.append((box, entry))
    found.sort(key=lambda pair: pair[0])
    for i, (box, _) in enumerate(found):
        for other, _ in found[i + 1 :]:
            if box and other[0][0] >= box[0][1]:  # sorted: no later one reaches back
                break
            if overlap(box, other) is not None:
                raise damaged(where, f"its slices {box} and {other} overlap")
    covered = sum(math.prod(stop - start for start, stop in box) for box, _ in found)
    if not found or covered != math.prod(shape):
        raise damaged(where, f"its slices cover {covered} of its {math.prod(shape)} values")
    return found


def _dtype_name(enum: int) -> str:
    dtype = _tf_proto.DTYPES.get(enum)
    return dtype.name if dtype is not None else f"type {enum}"


def assemble(
    read_entry: Callable[[Entry, str, str], np.ndarray],
    full: Entry,
    parts: list[tuple[Extents, Entry]],
    name: str,
    where: str,
) -> np.ndarray:
    """The tensor ``name`` whose whole is ``full``, from its slices' data (each read by
    ``read_entry``), checked by :func:`boxes` first."""
    out: np.ndarray | None = None
    for box, entry in boxes(full, parts, where):
        piece = read_entry(entry, where, name)
        if out is None:
            out = np.empty(full.shape, piece.dtype)  # every value is written: they cover it
        out[slices(box)] = piece
    assert out is not None  # boxes() refuses a tensor without slices
    return out


def partition(shape: tuple[int, ...], parts: int) -> list[Box]:
    """The boxes ``fixed_size_partitioner(parts)`` splits a tensor of ``shape`` into:
    along its first axis, the first ``rows % parts`` one row longer."""
    rows, rest = shape[0], tuple((0, d) for d in shape[1:])
    sizes = [rows // parts + (p < rows % parts) for p in range(parts)]
    starts = np.cumsum([0, *sizes[:-1]]).tolist()
    return [((start, start + size), *rest) for start, size in zip(starts, sizes, strict=True)]


def box_key(name: str, box: Box) -> bytes:
    """The key of the slice ``box`` of ``name``: every extent as ``start`` and ``length``,
    as TensorFlow's ``SaveSliceInfo`` spec gives them."""
    return slice_key(name, tuple((start, stop - start) for start, stop in box))


def full_entry(dtype: int, shape: tuple[int, ...], stored: list[Box]) -> bytes:
    """The entry of a tensor stored as the slices ``stored``: its dtype, shape and one
    ``TensorSliceProto`` per slice, no data."""
    protos = [
        b"".join(
            _tf_proto.put_bytes(
                1,
                _tf_proto.put_int(1, start)
                + _tf_proto.varint(2 << 3)
                + _tf_proto.varint(stop - start),
            )
            for start, stop in box
        )
        for box in stored
    ]
    head = _tf_proto.put_int(1, dtype) + _tf_proto.put_bytes(2, _tf_proto.shape_proto(shape))
    return head + b"".join(_tf_proto.put_bytes(7, proto) for proto in protos)


def expand(
    caller: str, partitions: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, int]:
    """The number of slices of each tensor to store partitioned: each name of
    ``partitions`` and the tensors named under it of its shape (its slots, its moving
    average), as TensorFlow stores a partitioned variable's."""
    if not isinstance(partitions, Mapping):
        raise TypeError(
            f"{caller}: partitions must map TensorFlow names to numbers of parts, got "
            f"{type(partitions).__name__}; pass e.g. partitions={{'embedding': 4}}."
        )
    out = {}
    hint = "pass the number of parts of tf.fixed_size_partitioner"
    for name, parts in partitions.items():
        number = as_int(caller, f"partitions[{name!r}]", parts, minimum=1, hint=hint)
        if name not in shapes:
            raise ValueError(
                f"{caller}: partitions names {name!r}, which is not saved; name a variable "
                f"by its TensorFlow name, one of {sorted(shapes)[:8]}."
            )
        shape = shapes[name]
        if not shape or shape[0] < number:
            raise ValueError(
                f"{caller}: partitions[{name!r}] is {number}, but {name!r} has shape {shape}; "
                "a partitioned variable has at least one row per part."
            )
        under = [k for k, v in shapes.items() if k.startswith(name + "/") and v == shape]
        out.update(dict.fromkeys([name, *under], number))
    return out
