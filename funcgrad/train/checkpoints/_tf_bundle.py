"""TensorFlow's tensor-bundle checkpoints (``tf.train.Saver``, format V2) with NumPy.

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

What it writes: a data file (:func:`write_data`), the same bytes TensorFlow writes for the
same tensors, and an index (:func:`index_table`) of the entries of one data file or of
several; ``_tf_job`` decides what goes where and puts them in place (``_tf_files``).

How it streams: a reader reads one tensor per :meth:`BundleReader.read`, into a fresh
64-byte-aligned buffer (which ``jax.device_put`` on a CPU takes over without a copy), or
in runs of rows (:meth:`BundleReader.chunks`) for a restore that keeps only a part;
:func:`write_data` makes, checksums and writes each tensor before the next is made.
CRC32C: ``_crc32c`` (the CPU's instruction).

What it reads: any number of shards; every fixed-size numeric dtype and bool; a
partitioned variable's slices as one array (``_tf_slices``, which also writes them).
Refused with :class:`CheckpointFormatError`: big-endian bundles, string / variant /
resource tensors and compressed index blocks (which TensorFlow never writes) — none of
which a ``TrainState`` holds.

What it assumes of its input: nothing.  Only regular files are opened; an index over
``INDEX_LIMIT`` bytes is refused by its size, and of the rest only the footer, then the
blocks it leads to (each once, in order, checked to lie inside the file before it is
read) are read; of a data file only the bytes an entry names, checked first against the
file's size.  Every CRC32C (each index block, the metaindex included, and each tensor) is
verified before a value is returned, and a size is checked against its shape before
anything is allocated.  Nothing is unpickled: the protobuf fields are parsed by hand and
arrays made with ``np.frombuffer``.  Every error for damaged contents names the file and
ends with what to do.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import mmap
import os
import re
import struct
from collections.abc import Iterable
from collections.abc import Iterator
from io import FileIO

import numpy as np

from funcgrad.train.checkpoints import _tf_files
from funcgrad.train.checkpoints import _tf_proto
from funcgrad.train.checkpoints import _tf_slices
from funcgrad.train.checkpoints._crc32c import crc32c
from funcgrad.train.checkpoints._crc32c import mask
from funcgrad.train.checkpoints._processes import Box
from funcgrad.train.checkpoints._tf_files import CheckpointFormatError as CheckpointFormatError
from funcgrad.train.checkpoints._tf_files import damaged
from funcgrad.train.checkpoints._tf_proto import DTYPES as DTYPES
from funcgrad.train.checkpoints._tf_proto import Cursor
from funcgrad.train.checkpoints._tf_proto import Entry
from funcgrad.train.checkpoints._tf_proto import varint

#: The largest index read, in bytes: 256 MiB, some two million tensors (TensorFlow 1.x
#: models hold thousands); a larger file is refused by its size before it is read.
INDEX_LIMIT = 1 << 28
#: The largest ``checkpoint`` state file read (a few lines per checkpoint kept).
_STATE_LIMIT = 1 << 24
_PREFIX_FIX = "pass the prefix of a checkpoint, e.g. 'train/model.ckpt-1000'"

_MAGIC, _FOOTER, _BLOCK, _ALIGN = 0xDB4775248B80FB57, 48, 262144, 64
#: The bytes a restore into a sharded template reads at a time (:meth:`BundleReader.chunks`).
_CHUNK = 1 << 24
#: Tensors from this size on are read into mapped memory (:func:`aligned`); Linux's
#: ``MADV_POPULATE_WRITE``, which Python's ``mmap`` does not name.
_MAPPED, _MADV_POPULATE_WRITE = 1 << 20, 23


def _block(file: FileIO, size: int, handle: tuple[int, int], where: str) -> memoryview:
    """A table block, its CRC32C verified, without its trailer; read once it is known to
    lie inside the file, before the footer."""
    offset, length = handle
    if offset + length + 5 > size - _FOOTER:
        raise damaged(
            where,
            f"a block (bytes {offset}..{offset + length + 5}) runs past the end of the "
            f"{size - _FOOTER} bytes before the footer",
            "truncated or damaged",
        )
    data = _tf_files.read_at(file, offset, length + 5, where)
    stored = struct.unpack_from("<I", data, length + 1)[0]
    if mask(crc32c(memoryview(data)[: length + 1])) != stored:
        raise damaged(where, f"the block at byte {offset} fails its CRC32C check")
    if data[length]:
        raise damaged(where, "a compressed block, which TensorFlow never writes")
    return memoryview(data)[:length]


def _pairs(block: memoryview, where: str) -> Iterator[tuple[bytes, bytes]]:
    """The ``(key, value)`` pairs of a block (keys share prefixes with the one before)."""
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0] if len(block) >= 4 else 0
    cursor = Cursor(block, where, end=len(block) - 4 - 4 * restarts)
    if restarts < 1 or cursor.end < 0:
        raise cursor.fail("a block without restart points")
    key = b""
    while cursor.pos < cursor.end:
        shared, own, size = cursor.varint(), cursor.varint(), cursor.varint()
        if shared > len(key):
            raise cursor.fail("a key longer than it can be")
        key = key[:shared] + cursor.take(own)
        yield key, cursor.take(size)


def _read_table(file: FileIO, size: int, where: str) -> list[tuple[bytes, bytes]]:
    """The pairs of the table in ``file``: its size and footer checked first, then its
    metaindex and index blocks, then each data block once, in order."""
    if size > INDEX_LIMIT:
        raise CheckpointFormatError(
            f"{where}: {size} bytes, more than the {INDEX_LIMIT} (256 MiB, some two million "
            f"tensors) an index may have here; it is not a checkpoint's index — {_PREFIX_FIX}."
        )
    tail = _tf_files.read_at(file, size - _FOOTER, _FOOTER, where) if size >= _FOOTER else b""
    if len(tail) < _FOOTER or struct.unpack_from("<Q", tail, 40)[0] != _MAGIC:
        raise CheckpointFormatError(
            f"{where}: not the index of a TensorFlow V2 checkpoint (no table footer); pass "
            "the prefix a tf.train.Saver wrote, e.g. 'model.ckpt-1000', of an intact copy."
        )
    footer = Cursor(tail, where, end=40)
    metaindex, index = (footer.varint(), footer.varint()), (footer.varint(), footer.varint())
    _block(file, size, metaindex, where)  # its CRC: a bundle's metaindex is empty (no filters)
    pairs: list[tuple[bytes, bytes]] = []
    end = 0
    for _, value in _pairs(_block(file, size, index, where), where):
        cursor = Cursor(value, where)
        handle = (cursor.varint(), cursor.varint())
        if handle[0] < end:
            raise damaged(where, f"the block at byte {handle[0]} overlaps the one before it")
        end = handle[0] + handle[1] + 5
        for key, entry in _pairs(_block(file, size, handle, where), where):
            if pairs and key <= pairs[-1][0]:
                raise damaged(where, f"its keys are out of order at {key[:40]!r}")
            pairs.append((key, entry))
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
        self.buf += varint(shared) + varint(len(key) - shared) + varint(len(value))
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
        handle = varint(len(out)) + varint(len(contents))
        out.extend(contents + struct.pack("<BI", 0, mask(crc32c(contents + b"\0"))))
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


def data_path(prefix: str, shard: int, shards: int) -> str:
    """The name of a data file: ``prefix.data-00000-of-00001``."""
    return f"{prefix}.data-{shard:05d}-of-{shards:05d}"


def exists(prefix: str) -> bool:
    """Whether there is a checkpoint at ``prefix`` (its index, or during an interrupted
    save, the previous one)."""
    return os.path.exists(_tf_files.index_of(prefix + ".index"))


class BundleReader:
    """The tensors of the checkpoint at ``prefix``: the index is read (and verified) now,
    each tensor when :meth:`read` asks for it.  While a save to ``prefix`` is interrupted
    (``prefix.index`` is missing, ``prefix.index.previous`` is there), the previous
    checkpoint is read.  Raises ``FileNotFoundError`` when there is no index and
    :class:`CheckpointFormatError` when it is not one.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix, self.index = prefix, _tf_files.index_of(prefix + ".index")
        self.previous, where = self.index != prefix + ".index", self.index
        file, size = _tf_files.open_regular(where, _PREFIX_FIX)
        with file:
            pairs = _read_table(file, size, where)
        if not pairs or pairs[0][0]:
            raise damaged(where, "the bundle header is missing")
        self.shards = _tf_proto.parse_header(pairs[0][1], where)
        self.entries: dict[str, Entry] = {}
        self.slices: dict[str, list[tuple[_tf_slices.Extents, Entry]]] = {}
        for key, value in pairs[1:]:
            if key[:1] == b"\0":  # a slice of a partitioned variable
                _tf_slices.add(self.slices, key, value, where)
            else:
                name = key.decode("utf-8", "replace")
                self.entries[name] = _tf_proto.parse_entry(value, f"{where} [{name!r}]")

    def _data(self, shard: int) -> str:
        """The data file of ``shard`` (the previous one, with the previous index)."""
        path = data_path(self.prefix, shard, self.shards)
        return path + _tf_files.PREVIOUS if self.previous else path

    def read(self, name: str) -> np.ndarray:
        """The tensor ``name`` as an array, its CRC32C verified."""
        entry, where = self.entries[name], f"{self.index} [{name!r}]"
        if entry.sliced:  # a partitioned variable: its slices make one array
            return _tf_slices.assemble(
                self.read_entry, entry, self.slices.get(name, []), name, where
            )
        return self.read_entry(entry, where, name)

    def pieces(self, name: str, where: str) -> list[tuple[Box, Entry]]:
        """Where the tensor ``name`` is stored: its one entry, as the box of all of it, or
        its slices' (checked to cover it exactly, ``_tf_slices.boxes``)."""
        entry = self.entries[name]
        if entry.sliced:
            return _tf_slices.boxes(entry, self.slices.get(name, []), where)
        return [(tuple((0, d) for d in entry.shape), entry)]

    def read_entry(self, entry: Entry, where: str, name: str) -> np.ndarray:
        """The data of ``entry`` (of the tensor ``name``), its CRC32C verified."""
        file, path, dtype = self._open(entry, where, name)
        with file:
            out = aligned(entry.size).view(dtype).reshape(entry.shape)
            _fill(file, path, entry, name, out)
        return out

    def read_into(self, entry: Entry, where: str, name: str, out: np.ndarray) -> None:
        """Fill ``out`` (a C-contiguous array of the entry's dtype and shape) with the
        data of ``entry``, its CRC32C verified."""
        file, path, _ = self._open(entry, where, name)
        with file:
            _fill(file, path, entry, name, out)

    def chunks(self, entry: Entry, where: str, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """The data of ``entry`` in runs of whole rows of its first axis (some
        :data:`_CHUNK` bytes each), as ``(first row, rows)``, in order; its CRC32C is
        checked after the last run is given, so the runs are kept only once this ends."""
        file, path, dtype = self._open(entry, where, name)
        shape, crc = entry.shape, 0
        total = shape[0] if shape else 1  # a scalar: one row
        row = math.prod(shape[1:]) * dtype.itemsize
        step = max(1, _CHUNK // row) if row else max(1, total)
        with file:
            for first in range(0, total, step):
                rows = min(step, total - first)
                buf = _tf_files.read_at(file, entry.offset + first * row, rows * row, path)
                crc = crc32c(buf, crc)
                yield first, np.frombuffer(buf, dtype).reshape((rows, *shape[1:]) if shape else ())
        if mask(crc) != entry.crc:
            raise damaged(path, f"{name!r} fails its CRC32C check")

    def _open(self, entry: Entry, where: str, name: str) -> tuple[FileIO, str, np.dtype]:
        """The data file of ``entry`` opened, its name, and the dtype of the data, once the
        entry is checked against its shape, the shards and the file's size."""
        dtype = DTYPES.get(entry.dtype)
        if dtype is None:
            raise CheckpointFormatError(
                f"{where}: a non-numeric tensor, which funcgrad does not read; re-save it "
                "from TensorFlow as a numeric tensor."
            )
        if entry.size != math.prod(entry.shape) * dtype.itemsize or entry.shard >= self.shards:
            raise damaged(where, "its index entry does not fit its shape or the shards")
        path = self._data(entry.shard)
        try:
            file, size = _tf_files.open_regular(path, "copy the checkpoint's data file there")
        except FileNotFoundError:
            raise CheckpointFormatError(
                f"{where}: its data file {path} is missing; copy it beside the index."
            ) from None
        end = entry.offset + entry.size
        if end > size:
            file.close()
            raise damaged(
                path, f"{name!r} is bytes {entry.offset}..{end}, but it ends at {size}", "truncated"
            )
        return file, path, dtype


def _fill(file: FileIO, path: str, entry: Entry, name: str, out: np.ndarray) -> None:
    """Read the data of ``entry`` from ``file`` into ``out``; check its CRC32C."""
    buf = out.reshape(-1).view(np.uint8)
    _tf_files.read_into(file, entry.offset, buf.data, path)
    if mask(crc32c(buf)) != entry.crc:
        raise damaged(path, f"{name!r} fails its CRC32C check")


def aligned(size: int) -> np.ndarray:
    """A writable ``uint8`` buffer at a 64-byte boundary, where ``jax.device_put`` on a CPU
    takes the memory over instead of copying it.  A large one is mapped and, where Linux
    can (5.14+), made present in one call: a fault per 4 KiB page as the file is read into
    it costs more than the read on a virtual machine."""
    if size >= _MAPPED and hasattr(mmap, "MAP_ANONYMOUS"):
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        with contextlib.suppress(OSError):  # a kernel without it: a fault per page instead
            memory.madvise(_MADV_POPULATE_WRITE)
        return np.frombuffer(memory, np.uint8)
    raw = np.empty(size + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    return raw[start : start + size]


def write_data(
    path: str, pieces: Iterable[tuple[bytes, np.ndarray]], shard: int
) -> tuple[str, list[tuple[bytes, bytes]]]:
    """Write ``pieces`` (a key and an array each, made as the iterable is read) to a fresh
    temporary file beside ``path``, the data file of ``shard``, each made, checksummed and
    written before the next is made; return its name and each piece's key and entry."""
    entries: list[tuple[bytes, bytes]] = []

    def raw() -> Iterator[memoryview]:
        offset = 0
        for key, piece in pieces:
            array = np.asarray(piece, piece.dtype.newbyteorder("<"), order="C")
            data = array.reshape(-1).view(np.uint8)
            crc = mask(crc32c(data))
            enum = _tf_proto.ENUMS[array.dtype]
            entries.append(
                (key, Entry(enum, array.shape, shard, offset, data.size, crc, False).encode())
            )
            offset += data.size
            yield data.data

    return _tf_files.temporary(path, raw()), entries


def index_table(shards: int, entries: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The index of a bundle of ``shards`` data files holding ``entries`` (key, entry)."""
    return _build_table(sorted([(b"", _tf_proto.header(shards)), *entries]))


_STATE_FILE = "checkpoint"
_LINE = re.compile(r'\s*(\w+)\s*:\s*"((?:[^"\\]|\\.)*)"\s*')


def latest_checkpoint(caller: str, directory: str) -> str | None:
    """The prefix the ``checkpoint`` file in ``directory`` names (as
    ``tf.train.latest_checkpoint``), or ``None``.  A relative path is taken inside
    ``directory``; an absolute one that is gone (the directory was moved or copied from
    another machine) is looked for there too.  Errors start with ``caller``."""
    state = os.path.join(directory, _STATE_FILE)
    fix = "rename it, or pass the checkpoint's prefix instead of its directory"
    try:
        file, size = _tf_files.open_regular(state, fix)
    except FileNotFoundError:
        return None
    except CheckpointFormatError as error:
        raise CheckpointFormatError(f"{caller}: {error}") from None
    with file:
        if size > _STATE_LIMIT:
            raise CheckpointFormatError(
                f"{caller}: {state} has {size} bytes, more than the {_STATE_LIMIT} a "
                f"'checkpoint' file naming checkpoints may have here; {fix}."
            )
        raw = _tf_files.read_at(file, 0, size, state)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for line in text.splitlines():
        match = _LINE.fullmatch(line)
        if match and match.group(1) == "model_checkpoint_path":
            try:
                path = codecs.escape_decode(match.group(2).encode())[0].decode("utf-8", "replace")
            except ValueError as error:
                raise CheckpointFormatError(
                    f"{caller}: {state} has a bad escape in {line.strip()!r} ({error}); write "
                    'the line as model_checkpoint_path: "model.ckpt-1000" (the prefix, '
                    "relative to the directory), or pass the checkpoint's prefix."
                ) from None
            for candidate in (
                os.path.join(directory, path),
                os.path.join(directory, os.path.basename(path)),
            ):
                if exists(candidate):
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
    if os.path.isdir(target):
        raise CheckpointFormatError(
            f"{target} is a directory where TensorFlow's 'checkpoint' file (naming the latest "
            f"checkpoint, here {name}) goes; rename it, or save to another directory."
        )
    os.replace(_tf_files.temporary(target, [text.encode()]), target)
