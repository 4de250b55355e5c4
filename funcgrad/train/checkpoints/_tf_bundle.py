"""TensorFlow's tensor-bundle checkpoints (``tf.train.Saver``, format V2) with NumPy alone.

Design note
-----------
What it follows: the files TensorFlow 2.21's ``BundleWriter`` / ``BundleReader``
(``tensorflow/core/util/tensor_bundle``) write and read for a ``tf.compat.v1.train.Saver``
checkpoint at ``prefix``, a format unchanged since TensorFlow 1.1 (bundle version 1):

* ``prefix.index``: a LevelDB table (``tsl/lib/io/table``), uncompressed, 256 KiB data
  blocks with a restart point every 16 keys, each block followed by a type byte and the
  masked CRC32C of both, then an empty metaindex block, an index block and a 48-byte
  footer ending in the magic ``0xdb4775248b80fb57``.  The empty key holds a
  ``BundleHeaderProto`` (shards, endianness, version); every other key is a tensor name
  whose value is a ``BundleEntryProto`` (dtype, shape, shard, offset, size, masked CRC32C
  of the bytes, slices).
* ``prefix.data-SSSSS-of-NNNNN``: the tensors' little-endian, C-order bytes, back to back.
* ``checkpoint`` beside them: a text ``CheckpointState`` naming the latest prefix.

What it writes: one shard, the same bytes TensorFlow writes for the same tensors
(tensors in name order, which is what a ``Saver`` passes), data then index to temporary
names, fsynced, then renamed into place (TensorFlow's order), so a crash never leaves a
readable half-written checkpoint.

What it reads: any number of shards; every fixed-size numeric dtype and bool.  Refused
with :class:`CheckpointFormatError`: big-endian bundles, string / variant / resource
tensors, partitioned variables (stored as slices) and compressed index blocks (which
TensorFlow never writes) — none of which a ``TrainState`` holds.

What it assumes of its input: nothing.  Every read is bounds-checked, every CRC32C (each
index block, each tensor) is verified before a value is returned, and a size is checked
against its shape and the file before anything is allocated.  Nothing is unpickled:
the protobuf fields are parsed by hand and arrays made with ``np.frombuffer``.
"""

from __future__ import annotations

import codecs
import itertools
import math
import os
import re
import struct
import uuid
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np


class CheckpointFormatError(ValueError):
    """A file is not a TensorFlow V2 checkpoint, or it is truncated or damaged."""


# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): TensorFlow's crc32c::Extend.
# Below _SMALL bytes a table loop; above, the input is cut into _LANE-byte lanes whose
# CRCs NumPy computes side by side (four bytes a step), then combined pairwise with the
# linear "append n zero bytes" operator, as zlib's crc32_combine.  ~650 MB/s.
_POLY, _SMALL, _LANE, _CHUNK = 0x82F63B78, 2048, 256, 1 << 22
_T0 = np.arange(256, dtype=np.uint32)
for _ in range(8):
    _T0 = np.where(_T0 & 1, (_T0 >> 1) ^ np.uint32(_POLY), _T0 >> 1).astype(np.uint32)
_T0_LIST = [int(x) for x in _T0]
_cache: dict[Any, Any] = {}


def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """One 32-bit step of the register ``s``: ``lo[s & 0xFFFF] ^ hi[s >> 16]``."""
    if "word" not in _cache:
        t1 = (_T0 >> 8) ^ _T0[_T0 & 0xFF]
        t2 = (t1 >> 8) ^ _T0[t1 & 0xFF]
        t3 = (t2 >> 8) ^ _T0[t2 & 0xFF]
        x = np.arange(1 << 16, dtype=np.uint32)
        _cache["word"] = (t3[x & 0xFF] ^ t2[x >> 8], t1[x & 0xFF] ^ _T0[x >> 8])
    return _cache["word"]


def _apply(columns: tuple[int, ...], x: int) -> int:
    """The GF(2) matrix with these 32 columns times the vector ``x``."""
    out, i = 0, 0
    while x:
        out ^= columns[i] if x & 1 else 0
        x, i = x >> 1, i + 1
    return out


def _zeros(k: int) -> tuple[int, ...]:
    """The operator "feed 2**k zero bytes" on a raw register, as 32 columns."""
    if k not in _cache:
        if k == 0:
            _cache[k] = tuple(_T0_LIST[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32))
        else:
            half = _zeros(k - 1)
            _cache[k] = tuple(_apply(half, c) for c in half)
    return _cache[k]


def _shift(register: int, n: int) -> int:
    """The raw register after ``n`` zero bytes."""
    k = 0
    while n and register:
        register = _apply(_zeros(k), register) if n & 1 else register
        n, k = n >> 1, k + 1
    return register


def _shift_tables(n: int) -> np.ndarray:
    """(4, 256) tables applying "feed ``n`` (a power of 2) zero bytes" byte by byte."""
    if ("shift", n) not in _cache:
        columns = np.array(_zeros(n.bit_length() - 1), np.uint32).reshape(4, 8)
        bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)
        _cache["shift", n] = np.stack(
            [np.bitwise_xor.reduce(np.where(bits, c, np.uint32(0)), axis=1) for c in columns]
        )
    return _cache["shift", n]


def _lanes(block: np.ndarray) -> int:
    """The raw register (from 0) after ``block``, whose size is a multiple of _LANE."""
    lo, hi = _word_tables()
    s = np.zeros(block.size // _LANE, np.uint32)
    for row in block.view("<u4").reshape(s.size, _LANE // 4).T:
        s ^= row
        s = lo[s & 0xFFFF] ^ hi[s >> 16]
    width = _LANE
    while s.size > 1:
        if s.size % 2:  # a zero lane in front changes nothing on a zero register
            s = np.concatenate([np.zeros(1, np.uint32), s])
        t, left = _shift_tables(width), s[0::2]
        s = s[1::2] ^ t[0][left & 0xFF] ^ t[1][(left >> 8) & 0xFF]
        s ^= t[2][(left >> 16) & 0xFF] ^ t[3][left >> 24]
        width *= 2
    return int(s[0])


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """The CRC-32C of ``data`` continued from ``crc`` (TensorFlow's ``crc32c::Extend``)."""
    buf = np.frombuffer(memoryview(data).cast("B"), np.uint8)  # type: ignore[arg-type]
    register = crc ^ 0xFFFFFFFF
    for start in range(0, buf.size, _CHUNK):
        chunk = buf[start : start + _CHUNK]
        if chunk.size < _SMALL:
            for b in chunk.tobytes():
                register = _T0_LIST[(register ^ b) & 0xFF] ^ (register >> 8)
            continue
        pad = -chunk.size % _LANE
        padded = np.concatenate([np.zeros(pad, np.uint8), chunk]) if pad else chunk
        register = _shift(register, chunk.size) ^ _lanes(padded)
    return register ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# TensorFlow's DataType enum -> NumPy dtype, for the types a bundle entry may hold here.
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<i4"), 4: np.dtype("u1"),
    5: np.dtype("<i2"), 6: np.dtype("i1"), 8: np.dtype("<c8"), 9: np.dtype("<i8"),
    10: np.dtype("?"), 14: np.dtype(jnp.bfloat16), 17: np.dtype("<u2"),
    18: np.dtype("<c16"), 19: np.dtype("<f2"), 22: np.dtype("<u4"), 23: np.dtype("<u8"),
}  # fmt: skip
_ENUMS = {dtype: enum for enum, dtype in DTYPES.items()}


class _Cursor:
    """Bounds-checked reads from a buffer; a failure names ``where``."""

    def __init__(self, buf: bytes | memoryview, where: str, pos: int = 0, end: int = -1) -> None:
        self.buf, self.where, self.pos = buf, where, pos
        self.end = len(buf) if end < 0 else end

    def fail(self, what: str) -> CheckpointFormatError:
        return CheckpointFormatError(
            f"{self.where}: {what} at byte {self.pos}; the file is damaged or not a "
            "TensorFlow checkpoint — use an intact copy."
        )

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


def _fields(buf: bytes, where: str) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of a protobuf message: varint and fixed32 as ints,
    length-delimited as bytes (the wire types bundle protos use)."""
    cursor = _Cursor(buf, where)
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


def _int(value: int | bytes, where: str) -> int:
    """A varint field as a signed int64."""
    if isinstance(value, bytes):
        raise CheckpointFormatError(f"{where}: a number field holds bytes; the file is damaged.")
    return value - (1 << 64) if value >> 63 else value


def _message(value: int | bytes, where: str) -> bytes:
    if not isinstance(value, bytes):
        raise CheckpointFormatError(f"{where}: a message field holds a number; it is damaged.")
    return value


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def _put_int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value) if value else b""


def _put_bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


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
        dims = b"".join(_put_bytes(2, _put_int(1, d)) for d in self.shape)
        head = _put_int(1, self.dtype) + _put_bytes(2, dims) + _put_int(3, self.shard)
        tail = _put_int(4, self.offset) + _put_int(5, self.size)
        return head + tail + struct.pack("<BI", 6 << 3 | 5, self.crc)  # fixed32 field 6


def _entry(buf: bytes, where: str) -> Entry:
    fields: dict[int, Any] = {1: 0, 3: 0, 4: 0, 5: 0, 6: 0}
    shape: list[int] = []
    sliced = False
    for field, value in _fields(buf, where):
        if field == 2:
            for f, dim in _fields(_message(value, where), where):
                if f == 3 and dim:
                    raise CheckpointFormatError(f"{where}: the shape has an unknown rank.")
                if f == 2:
                    sizes = [
                        _int(v, where) for g, v in _fields(_message(dim, where), where) if g == 1
                    ]
                    shape.append(sizes[-1] if sizes else 0)
        elif field == 7:
            sliced = True
        elif field in fields:
            fields[field] = _int(value, where)
    entry = Entry(fields[1], tuple(shape), fields[3], fields[4], fields[5], fields[6], sliced)
    if min(entry.shard, entry.offset, entry.size, *entry.shape) < 0:
        raise CheckpointFormatError(f"{where}: a negative size, offset or dimension.")
    return entry


def _header(buf: bytes, where: str) -> int:
    """The number of shards a ``BundleHeaderProto`` states, after TensorFlow's checks."""
    shards, endianness, producer, min_consumer = 0, 0, 0, 0
    for field, value in _fields(buf, where):
        if field == 1:
            shards = _int(value, where)
        elif field == 2:
            endianness = _int(value, where)
        elif field == 3:
            version = dict(_fields(_message(value, where), where))
            producer = _int(version.get(1, 0), where)
            min_consumer = _int(version.get(2, 0), where)
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
        raise CheckpointFormatError(f"{where}: the header states {shards} shards; it is damaged.")
    return shards


_MAGIC, _FOOTER, _BLOCK = 0xDB4775248B80FB57, 48, 262144


def _block(data: bytes, handle: tuple[int, int], where: str) -> memoryview:
    """A table block, its CRC32C verified, without its trailer."""
    offset, size = handle
    if offset + size + 5 > len(data) - _FOOTER:
        raise CheckpointFormatError(
            f"{where}: a block runs past the end of the file; it is truncated or damaged — "
            "use an intact copy."
        )
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    if _mask(crc32c(memoryview(data)[offset : offset + size + 1])) != stored:
        raise CheckpointFormatError(
            f"{where}: the block at byte {offset} fails its CRC32C check; the file is "
            "damaged — use an intact copy."
        )
    if data[offset + size]:
        raise CheckpointFormatError(f"{where}: a compressed block, which TensorFlow never writes.")
    return memoryview(data)[offset : offset + size]


def _pairs(block: memoryview, where: str) -> Iterator[tuple[bytes, bytes]]:
    """The ``(key, value)`` pairs of a block (keys share prefixes with the one before)."""
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0] if len(block) >= 4 else 0
    cursor = _Cursor(block, where, end=len(block) - 4 - 4 * restarts)
    if restarts < 1 or cursor.end < 0:
        raise cursor.fail("a block without restart points")
    key = b""
    while cursor.pos < cursor.end:
        shared, own, size = cursor.varint(), cursor.varint(), cursor.varint()
        if shared > len(key):
            raise cursor.fail("a key longer than it can be")
        key = key[:shared] + cursor.take(own)
        yield key, cursor.take(size)


def _read_table(data: bytes, where: str) -> list[tuple[bytes, bytes]]:
    if len(data) < _FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise CheckpointFormatError(
            f"{where}: not the index of a TensorFlow V2 checkpoint (no table footer); pass "
            "the prefix a tf.train.Saver wrote, e.g. 'model.ckpt-1000', of an intact copy."
        )
    footer = _Cursor(data, where, pos=len(data) - _FOOTER, end=len(data) - 8)
    footer.varint(), footer.varint()  # the metaindex block: a bundle has no filters
    index = _block(data, (footer.varint(), footer.varint()), where)
    pairs: list[tuple[bytes, bytes]] = []
    for _, handle in _pairs(index, where):
        cursor = _Cursor(handle, where)
        pairs.extend(_pairs(_block(data, (cursor.varint(), cursor.varint()), where), where))
    if any(a >= b for (a, _), (b, _) in itertools.pairwise(pairs)):
        raise CheckpointFormatError(f"{where}: its keys are out of order; the file is damaged.")
    return pairs


class _BlockBuilder:
    """LevelDB's ``BlockBuilder``: keys share prefixes, a restart point every ``every``."""

    def __init__(self, every: int) -> None:
        self.every, self.buf, self.restarts, self.count, self.last = every, bytearray(), [0], 0, b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.count == self.every:
            self.restarts.append(len(self.buf))
            self.count = 0
        else:
            while shared < min(len(key), len(self.last)) and key[shared] == self.last[shared]:
                shared += 1
        self.buf += _varint(shared) + _varint(len(key) - shared) + _varint(len(value))
        self.buf += key[shared:] + value
        self.last, self.count = key, self.count + 1

    def finish(self) -> bytes:
        return bytes(self.buf) + struct.pack(
            f"<{len(self.restarts) + 1}I", *self.restarts, len(self.restarts)
        )


def _separator(start: bytes, limit: bytes | None) -> bytes:
    """LevelDB's ``FindShortestSeparator``, or ``FindShortSuccessor`` when ``limit`` is None."""
    if limit is None:
        i = next((i for i, b in enumerate(start) if b != 0xFF), len(start))
        return start[:i] + bytes([start[i] + 1]) if i < len(start) else start
    i, n = 0, min(len(start), len(limit))
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _build_table(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The table TensorFlow's ``tsl::table::TableBuilder`` writes, uncompressed."""
    out = bytearray()

    def write(block: _BlockBuilder) -> bytes:
        contents = block.finish()
        handle = _varint(len(out)) + _varint(len(contents))
        out.extend(contents + struct.pack("<BI", 0, _mask(crc32c(contents + b"\0"))))
        return handle

    data, index, last, pending = _BlockBuilder(16), _BlockBuilder(1), b"", b""
    for key, value in pairs:
        if pending:
            index.add(_separator(last, key), pending)
            pending = b""
        data.add(key, value)
        last = key
        if len(data.buf) + 4 * len(data.restarts) + 4 >= _BLOCK:
            pending, data = write(data), _BlockBuilder(16)
    if data.buf:
        pending = write(data)
    metaindex = write(_BlockBuilder(16))
    if pending:
        index.add(_separator(last, None), pending)
    footer = (metaindex + write(index)).ljust(40, b"\0") + struct.pack("<Q", _MAGIC)
    return bytes(out + footer)


def _data_path(prefix: str, shard: int, shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{shards:05d}"


class BundleReader:
    """The tensors of the checkpoint at ``prefix``: the index is read (and verified) now,
    each tensor when :meth:`read` asks for it.  Raises ``FileNotFoundError`` when
    ``prefix.index`` does not exist and :class:`CheckpointFormatError` when it is no index.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix, where = prefix, prefix + ".index"
        pairs = _read_table(Path(where).read_bytes(), where)
        if not pairs or pairs[0][0]:
            raise CheckpointFormatError(f"{where}: the bundle header is missing; it is damaged.")
        self.shards = _header(pairs[0][1], where)
        self.entries: dict[str, Entry] = {}
        for key, value in pairs[1:]:
            if key[:1] != b"\0":  # keys of a partitioned variable's slices start with 0
                name = key.decode("utf-8", "replace")
                self.entries[name] = _entry(value, f"{where} [{name!r}]")

    def read(self, name: str) -> np.ndarray:
        """The tensor ``name`` as an array, its CRC32C verified."""
        entry, where = self.entries[name], f"{self.prefix} [{name!r}]"
        dtype = DTYPES.get(entry.dtype)
        if entry.sliced or dtype is None:
            raise CheckpointFormatError(
                f"{where}: a {'partitioned variable' if entry.sliced else 'non-numeric tensor'}"
                ", which funcgrad does not read; re-save it from TensorFlow unpartitioned, "
                "as a numeric tensor."
            )
        if entry.size != math.prod(entry.shape) * dtype.itemsize or entry.shard >= self.shards:
            raise CheckpointFormatError(
                f"{where}: its entry does not fit its shape; it is damaged."
            )
        path = _data_path(self.prefix, entry.shard, self.shards)
        try:
            with open(path, "rb") as f:
                fits = entry.offset + entry.size <= os.fstat(f.fileno()).st_size
                f.seek(entry.offset)
                buf = f.read(entry.size if fits else 0)
        except FileNotFoundError:
            raise CheckpointFormatError(
                f"{where}: its data file {path} is missing; copy it beside the index."
            ) from None
        if len(buf) != entry.size:
            raise CheckpointFormatError(
                f"{path}: {name!r} needs bytes {entry.offset}..{entry.offset + entry.size} "
                f"but the file ends first; it is truncated — use an intact copy."
            )
        if _mask(crc32c(buf)) != entry.crc:
            raise CheckpointFormatError(
                f"{path}: {name!r} fails its CRC32C check; the file is damaged — use an "
                "intact copy."
            )
        return np.frombuffer(buf, dtype).reshape(entry.shape)


def _temporary(path: str, pieces: Iterable[bytes | memoryview]) -> str:
    """Write ``pieces`` to a fresh file beside ``path``, fsynced; return its name."""
    temp = f"{path}.tempstate{uuid.uuid4().hex}"
    try:
        with open(temp, "wb") as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


def write_bundle(prefix: str, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` (numeric or bool arrays, by non-empty name) as one shard."""
    arrays = {}
    for name, value in sorted(tensors.items()):
        array = np.asarray(value)
        arrays[name.encode()] = np.asarray(array, array.dtype.newbyteorder("<"), order="C")
    entries, offset = [(b"", _put_int(1, 1) + _put_bytes(3, _put_int(1, 1)))], 0
    for key, array in arrays.items():
        raw = array.reshape(-1).view(np.uint8)
        crc = _mask(crc32c(raw))
        entry = Entry(_ENUMS[array.dtype], array.shape, 0, offset, raw.size, crc, False)
        entries.append((key, entry.encode()))
        offset += raw.size
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    data_path = _data_path(prefix, 0, 1)
    data = _temporary(data_path, (a.reshape(-1).view(np.uint8).data for a in arrays.values()))
    try:
        index = _temporary(prefix + ".index", [_build_table(entries)])
    except BaseException:
        Path(data).unlink()
        raise
    os.replace(data, data_path)
    os.replace(index, prefix + ".index")


_STATE_FILE = "checkpoint"
_LINE = re.compile(r'\s*(\w+)\s*:\s*"((?:[^"\\]|\\.)*)"\s*')


def latest_checkpoint(directory: str) -> str | None:
    """The prefix the ``checkpoint`` file in ``directory`` names (as
    ``tf.train.latest_checkpoint``), or ``None``.  A relative path is taken inside
    ``directory``; an absolute one that is gone (the directory was moved or copied from
    another machine) is looked for there too."""
    try:
        text = Path(directory, _STATE_FILE).read_text("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        match = _LINE.fullmatch(line)
        if match and match.group(1) == "model_checkpoint_path":
            path = codecs.escape_decode(match.group(2).encode())[0].decode("utf-8", "replace")
            for candidate in (
                os.path.join(directory, path),
                os.path.join(directory, os.path.basename(path)),
            ):
                if os.path.exists(candidate + ".index"):
                    return candidate
    return None


def _quote(text: str) -> str:
    """A string in protobuf's text format: quotes, backslashes and non-ASCII escaped."""
    return (
        '"'
        + "".join(
            f"\\{chr(b)}" if chr(b) in '"\\' else chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}"
            for b in text.encode()
        )
        + '"'
    )


def write_checkpoint_state(prefix: str) -> None:
    """Make ``prefix`` the latest checkpoint in the ``checkpoint`` file of its directory,
    relative to it (so the directory can be moved), replacing the file atomically."""
    directory, name = os.path.split(os.path.abspath(prefix))
    text = f"model_checkpoint_path: {_quote(name)}\nall_model_checkpoint_paths: {_quote(name)}\n"
    target = os.path.join(directory, _STATE_FILE)
    os.replace(_temporary(target, [text.encode()]), target)
