"""The files of a TensorFlow checkpoint: read within bounds, replaced as a pair.

Design note
-----------
What it guarantees a reader: a file is opened only when it is a regular file — a
directory, a FIFO, or a device such as ``/dev/zero`` (which has no end) is refused before
a byte is read — and only the byte ranges asked for are read, each checked against the
file's size first.  Nothing is read without a bound.

What it guarantees a writer (:func:`replace_pair`): TensorFlow's two files of a
checkpoint, ``prefix.index`` and ``prefix.data-00000-of-00001``, have fixed names, so
one rename cannot swap both.  They are replaced so that whenever ``prefix.index`` exists
it belongs with the data file beside it, and whenever it does not, the pair it had
before is complete under ``.previous`` names:

1. the new files are written under temporary names (``<name>.tempstate<32 hex digits>``)
   and fsynced;
2. the old data file is linked (copied where the file system has no hard links) to
   ``prefix.data-00000-of-00001.previous``, then the old index renamed to
   ``prefix.index.previous``: from here ``prefix.index`` is missing and the previous pair
   complete;
3. the new data file is renamed into place, then the new index;
4. the ``.previous`` files are removed.

A reader that finds no ``prefix.index`` but a ``prefix.index.previous`` reads the previous
pair (:func:`index_of`), so a save killed at any instant leaves a prefix that restores to
its old values or to its new ones, never a pair that fails its checksums.  A save first
removes what earlier killed saves of the same prefix left (:func:`remove_leftovers`): its
temporary files (only names of the pattern above, a copy's ``.previous.tempstate...``
included) and ``.previous`` files once ``prefix.index`` exists again.

What it assumes: one process saves a given prefix at a time (as with TensorFlow's
``Saver``); a rename within a directory is atomic (POSIX, and NTFS's ``MoveFileEx``).
"""

from __future__ import annotations

import os
import re
import stat
import uuid
from collections.abc import Iterable
from io import FileIO
from pathlib import Path

PREVIOUS = ".previous"
_TEMPORARY = r"\.tempstate[0-9a-f]{32}"
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
_FIX = (
    "use an intact copy of the checkpoint (or an earlier step's), or save it again from TensorFlow"
)


class CheckpointFormatError(ValueError):
    """A file is not a TensorFlow V2 checkpoint, or it is truncated or damaged."""


def damaged(where: str, what: str, how: str = "damaged") -> CheckpointFormatError:
    """The error for damaged contents: the file, what is wrong in it, and what to do."""
    return CheckpointFormatError(f"{where}: {what}; the file is {how} — {_FIX}.")


def open_regular(path: str, fix: str) -> tuple[FileIO, int]:
    """``path`` opened for reading, and its size.

    Raises ``FileNotFoundError`` when it is missing, and :class:`CheckpointFormatError`
    ending with ``fix`` when it is not a regular file (the FIFO is opened without
    blocking, so that it can be refused).
    """
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        kind = "a directory"
    else:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            file = os.fdopen(fd, "rb", buffering=0)
            return file, os.fstat(fd).st_size
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    raise CheckpointFormatError(f"{path} is {kind}, not a file; {fix}.")


def read_at(file: FileIO, offset: int, size: int, where: str) -> bytearray:
    """``size`` bytes of ``file`` from ``offset`` (which the caller checked lie inside it)."""
    buf = bytearray(size)
    read_into(file, offset, memoryview(buf), where)
    return buf


def read_into(file: FileIO, offset: int, buf: memoryview, where: str) -> None:
    """Fill ``buf`` with the bytes of ``file`` from ``offset`` (checked by the caller)."""
    got = 0
    file.seek(offset)
    while got < len(buf):
        n = file.readinto(buf[got:])
        if not n:
            raise damaged(where, f"it ended at byte {offset + got} while being read", "truncated")
        got += n


def temporary(path: str, pieces: Iterable[bytes | memoryview]) -> str:
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


def index_of(index: str) -> str:
    """The index to read for ``index``: itself, or during an interrupted save (it is
    missing), the previous one when it exists."""
    previous = index + PREVIOUS
    return previous if not os.path.lexists(index) and os.path.lexists(previous) else index


def remove_leftovers(index: str, data: str) -> None:
    """Remove what killed saves of this pair left: temporary files, and the ``.previous``
    pair when ``index`` exists (the save that made them completed)."""
    for path in (index, data):
        if os.path.isdir(path):
            raise CheckpointFormatError(
                f"{path} is a directory where the checkpoint's file goes; remove it, or "
                "save to another prefix."
            )
    directory = os.path.dirname(os.path.abspath(index))
    names = "|".join(re.escape(os.path.basename(p)) for p in (index, data))
    pattern = re.compile(f"(?:{names})(?:{re.escape(PREVIOUS)})?{_TEMPORARY}")
    with os.scandir(directory) as entries:
        for entry in entries:
            if pattern.fullmatch(entry.name):
                Path(entry.path).unlink(missing_ok=True)
    if os.path.lexists(index):
        for path in (index, data):
            Path(path + PREVIOUS).unlink(missing_ok=True)


def _keep(path: str, kept: str) -> None:
    """``path``'s contents also under ``kept``: a hard link, or a copy without them."""
    try:
        os.link(path, kept)
    except FileNotFoundError:
        return
    except OSError:  # a file system without hard links
        with open(path, "rb") as f:
            os.replace(temporary(kept, iter(lambda: f.read(1 << 24), b"")), kept)


def _sync(directory: str) -> None:
    """Make the renames in ``directory`` durable (POSIX; elsewhere a rename is)."""
    if os.name == "posix":
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_pair(index: str, data: str, new_index: str, new_data: str) -> None:
    """Rename ``new_data`` to ``data`` and ``new_index`` to ``index``, the old pair kept
    as ``.previous`` files meanwhile (the module's design note)."""
    directory = os.path.dirname(os.path.abspath(index))
    if os.path.lexists(index):
        _keep(data, data + PREVIOUS)
        os.replace(index, index + PREVIOUS)
        _sync(directory)
    os.replace(new_data, data)
    os.replace(new_index, index)
    _sync(directory)
    for path in (index, data):
        Path(path + PREVIOUS).unlink(missing_ok=True)
