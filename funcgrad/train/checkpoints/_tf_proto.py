"""The protobuf records of a TensorFlow tensor bundle, parsed and written by hand.

Design note
-----------
What it follows: the two messages of TensorFlow 2.21's ``tensor_bundle.proto`` that a
checkpoint's index holds, and the wire format they are written in:

* ``BundleHeaderProto`` (under the empty key): ``num_shards`` (field 1), ``endianness``
  (2, 0 for little-endian) and a ``VersionDef`` (3: ``producer`` 1, ``min_consumer`` 2);
* ``BundleEntryProto`` (under a tensor's name, or a slice's key): ``dtype`` (1, the
  ``DataType`` enum), ``shape`` (2, a ``TensorShapeProto`` of ``dim`` messages with a
  ``size`` each), ``shard_id`` (3), ``offset`` (4), ``size`` (5), ``crc32c`` (6, a
  fixed32 of the masked CRC) and ``slices`` (7, one ``TensorSliceProto`` per slice, on the
  entry of a partitioned tensor's whole, which holds no data).

Varints and length-delimited fields are written as protobuf writes them, fields at
their default (0) left out, so the bytes are TensorFlow's own.

What it assumes of its input: nothing.  Every read is checked against the end of its
buffer, and every failure is a :class:`CheckpointFormatError` that names the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from funcgrad.train.checkpoints._tf_files import CheckpointFormatError
from funcgrad.train.checkpoints._tf_files import damaged

# TensorFlow's DataType enum -> NumPy dtype, for the types a bundle entry may hold here.
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<i4"), 4: np.dtype("u1"),
    5: np.dtype("<i2"), 6: np.dtype("i1"), 8: np.dtype("<c8"), 9: np.dtype("<i8"),
    10: np.dtype("?"), 14: np.dtype(jnp.bfloat16), 17: np.dtype("<u2"),
    18: np.dtype("<c16"), 19: np.dtype("<f2"), 22: np.dtype("<u4"), 23: np.dtype("<u8"),
}  # fmt: skip
ENUMS = {dtype: enum for enum, dtype in DTYPES.items()}


class Cursor:
    """Bounds-checked reads from a buffer; a failure names ``where``."""

    def __init__(
        self, buf: bytes | bytearray | memoryview, where: str, pos: int = 0, end: int = -1
    ) -> None:
        self.buf, self.where, self.pos = buf, where, pos
        self.end = len(buf) if end < 0 else end

    def fail(self, what: str) -> CheckpointFormatError:
        return damaged(self.where, f"{what} at byte {self.pos} of a record")

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= self.end or shift > 63:
                raise self.fail("a truncated or overlong varint")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result & ((1 << 64) - 1)

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise self.fail(f"{n} bytes wanted, {self.end - self.pos} left")
        self.pos += n
        return bytes(self.buf[self.pos - n : self.pos])


def fields(buf: bytes, where: str) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of a protobuf message: varint and fixed32 as ints,
    length-delimited as bytes (the wire types bundle protos use)."""
    cursor = Cursor(buf, where)
    while cursor.pos < cursor.end:
        key = cursor.varint()
        wire = key & 7
        if wire == 0:
            yield key >> 3, cursor.varint()
        elif wire == 2:
            yield key >> 3, cursor.take(cursor.varint())
        elif wire == 5:
            yield key >> 3, struct.unpack("<I", cursor.take(4))[0]
        elif wire == 1:
            yield key >> 3, struct.unpack("<Q", cursor.take(8))[0]
        else:
            raise cursor.fail(f"a protobuf field of wire type {wire}")


def number(value: int | bytes, where: str) -> int:
    """A varint field as a signed int64."""
    if isinstance(value, bytes):
        raise damaged(where, "a number field holds bytes")
    return value - (1 << 64) if value >> 63 else value


def message(value: int | bytes, where: str) -> bytes:
    """A length-delimited field's bytes."""
    if not isinstance(value, bytes):
        raise damaged(where, "a message field holds a number")
    return value


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (a negative one as its 64-bit two's complement)."""
    out = bytearray()
    value &= (1 << 64) - 1
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def put_int(field: int, value: int) -> bytes:
    """A varint field; nothing for 0, protobuf's default."""
    return varint(field << 3) + varint(value) if value else b""


def put_bytes(field: int, value: bytes) -> bytes:
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(value)) + value


def shape_proto(shape: tuple[int, ...]) -> bytes:
    """A ``TensorShapeProto``."""
    return b"".join(put_bytes(2, put_int(1, d)) for d in shape)


def header(shards: int) -> bytes:
    """The ``BundleHeaderProto`` of a little-endian bundle of ``shards`` data files."""
    return put_int(1, shards) + put_bytes(3, put_int(1, 1))


class Entry(NamedTuple):
    """Where a tensor is (a ``BundleEntryProto``): ``dtype`` is TensorFlow's enum."""

    dtype: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc: int
    sliced: bool

    def encode(self) -> bytes:
        head = put_int(1, self.dtype) + put_bytes(2, shape_proto(self.shape))
        tail = put_int(3, self.shard) + put_int(4, self.offset) + put_int(5, self.size)
        return head + tail + struct.pack("<BI", 6 << 3 | 5, self.crc)  # fixed32 field 6


def parse_entry(buf: bytes, where: str) -> Entry:
    """The :class:`Entry` a ``BundleEntryProto`` holds (``sliced`` when it lists slices)."""
    values: dict[int, Any] = {1: 0, 3: 0, 4: 0, 5: 0, 6: 0}
    shape: list[int] = []
    sliced = False
    for field, value in fields(buf, where):
        if field == 2:
            for f, dim in fields(message(value, where), where):
                if f == 3 and dim:
                    raise damaged(where, "a tensor's shape has an unknown rank")
                if f == 2:
                    sizes = [
                        number(v, where) for g, v in fields(message(dim, where), where) if g == 1
                    ]
                    shape.append(sizes[-1] if sizes else 0)
        elif field == 7:
            sliced = True
        elif field in values:
            values[field] = number(value, where)
    entry = Entry(values[1], tuple(shape), values[3], values[4], values[5], values[6], sliced)
    if min(entry.shard, entry.offset, entry.size, *entry.shape) < 0:
        raise damaged(where, "a negative size, offset or dimension")
    return entry


def parse_header(buf: bytes, where: str) -> int:
    """The number of shards a ``BundleHeaderProto`` states, after TensorFlow's checks."""
    shards, endianness, producer, min_consumer = 0, 0, 0, 0
    for field, value in fields(buf, where):
        if field == 1:
            shards = number(value, where)
        elif field == 2:
            endianness = number(value, where)
        elif field == 3:
            version = dict(fields(message(value, where), where))
            producer = number(version.get(1, 0), where)
            min_consumer = number(version.get(2, 0), where)
    if producer < 0 or min_consumer > 1:
        raise CheckpointFormatError(
            f"{where}: a bundle of format version (producer {producer}, min_consumer "
            f"{min_consumer}), newer than TensorFlow 2.21's (1); save it with the V2 format."
        )
    if endianness:
        raise CheckpointFormatError(
            f"{where}: written on a big-endian machine, which this reader does not support; "
            "re-save it on a little-endian (x86, ARM) machine."
        )
    if shards < 1:
        raise damaged(where, f"the header states {shards} shards")
    return shards
