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

1. the new files are written under temporary names
   (``<name>.tempstate<32 hex digits>-<pid>-<host>``: the writer's process id, and 8 hex
   digits of a hash of its host name) and fsynced;
2. the old data file is linked (copied where the file system has no hard links) to
   ``prefix.data-00000-of-00001.previous``, then the old index renamed to
   ``prefix.index.previous``: from here ``prefix.index`` is missing and the previous pair
   complete;
3. the new data file is renamed into place, then the new index;
4. the ``.previous`` files are removed.

A reader that finds no ``prefix.index`` but a ``prefix.index.previous`` reads the previous
pair (:func:`index_of`), so a save killed at any instant leaves a prefix that restores to
its old values or to its new ones, never a pair that fails its checksums.  A save first
removes what earlier killed saves left (:func:`remove_leftovers`): of the same prefix, its
temporary files (only names of the pattern above, a copy's ``.previous.tempstate...``
and those named before the pid and host were, ``<name>.tempstate<32 hex digits>``,
included) and ``.previous`` files once ``prefix.index`` exists again; of any prefix in
the directory (and of its ``checkpoint`` file), the temporary files whose writer is
provably dead: written on this host by a process id that no process has now.  A live
writer's files are never removed (its pid runs), nor another host's (its pids cannot be
checked here), nor files of a pid that was reused (it runs): they wait for a later save.

What it assumes: one process saves a given prefix at a time (as with TensorFlow's
``Saver``); a rename within a directory is atomic (POSIX, and NTFS's ``MoveFileEx``);
machines (and containers) that share a directory have host names of their own; a killed
writer has been reaped by its parent (a zombie's pid still runs).  Outside POSIX, where a
pid cannot be probed without side effects, no other prefix's file is removed.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
import uuid
from collections.abc import Iterable
from io import FileIO
from pathlib import Path

PREVIOUS = ".previous"
#: This host, as temporary names carry it: 8 hex digits of a hash of its name.
_HOST = hashlib.blake2s(socket.gethostname().encode(), digest_size=4).hexdigest()
#: A temporary name's end: since the pid and host were added, and before.
_TEMPORARY = r"\.tempstate[0-9a-f]{32}(?:-\d+-[0-9a-f]{8})?"
_OWNED = re.compile(r".+\.tempstate[0-9a-f]{32}-(\d+)-([0-9a-f]{8})")
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
    view, got = memoryview(buf), 0
    file.seek(offset)
    while got < size:
        n = file.readinto(view[got:])
        if not n:
            raise damaged(where, f"it ended at byte {offset + got} while being read", "truncated")
        got += n
    return buf


def temporary(path: str, pieces: Iterable[bytes | memoryview]) -> str:
    """Write ``pieces`` to a fresh file beside ``path``, fsynced; return its name."""
    temp = f"{path}.tempstate{uuid.uuid4().hex}-{os.getpid()}-{_HOST}"
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


def _dead(pid: int, host: str) -> bool:
    """Whether the writer ``pid`` of ``host`` is provably gone: it wrote on this host, and
    no process there has its pid now (POSIX, where signal 0 probes without a signal)."""
    if host != _HOST or pid == os.getpid() or os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # it runs, as another user; or no pid at all
        return False
    return False


def remove_leftovers(index: str, data: str) -> None:
    """Remove what killed saves left: this pair's temporary files, and its ``.previous``
    pair when ``index`` exists (the save that made them completed); and the temporary
    files of any prefix in the directory whose writer is dead (:func:`_dead`)."""
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
            owner = _OWNED.fullmatch(entry.name)
            if pattern.fullmatch(entry.name) or (
                owner and _dead(int(owner.group(1)), owner.group(2))
            ):
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
