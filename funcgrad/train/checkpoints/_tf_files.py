"""The files of a TensorFlow checkpoint: read within bounds, replaced as a pair.

Design note
-----------
What it guarantees a reader: a file is opened only when it is a regular file — a
directory, a FIFO, or a device such as ``/dev/zero`` (which has no end) is refused before
a byte is read — and only the byte ranges asked for are read, each checked against the
file's size first.  Nothing is read without a bound.

What it guarantees a writer (:func:`replace`): TensorFlow's files of a checkpoint,
``prefix.index`` and its data files ``prefix.data-00000-of-00001`` (or, written by
several processes, ``prefix.data-00000-of-00002``, ``prefix.data-00001-of-00002``, ...),
have fixed names, so one rename cannot swap them all.  They are replaced so that whenever
``prefix.index`` exists it belongs with the data files beside it, and whenever it does
not, the checkpoint it had before is complete under ``.previous`` names:

1. the new files are written under temporary names
   (``<name>.tempstate<32 hex digits>-<pid>-<host>``: the writer's process id, and 8 hex
   digits of a hash of its host name) and fsynced;
2. each old data file is linked (copied where the file system has no hard links) to
   ``<its name>.previous``, then the old index renamed to ``prefix.index.previous``: from
   here ``prefix.index`` is missing and the previous checkpoint complete;
3. the new data files are renamed into place, then the new index;
4. the old data files the new index does not name (of another number of shards) and the
   ``.previous`` files are removed.

A reader that finds no ``prefix.index`` but a ``prefix.index.previous`` reads the previous
checkpoint (:func:`index_of`), so a save killed at any instant leaves a prefix that
restores to its old values or to its new ones, never files that fail their checksums.

One save of a prefix at a time (:func:`locked`): a save holds an exclusive ``flock`` on
``prefix.lock`` from before it removes leftovers until its index is in place, so a second
program saving the same prefix waits, then saves whole after it (the last save wins, as
two saves one after the other).  The lock file is removed when released; a save killed
leaves it unlocked (the kernel releases a dead process's locks), holding the line
:data:`_MARK`, until a later save in the directory takes it without waiting and removes
it (a file of that name and another content is not ours, and stays).

A save first removes what earlier killed saves left (:func:`remove_leftovers`): of the
same prefix, its temporary files (only names of the pattern above, a copy's
``.previous.tempstate...`` and those named before the pid and host were,
``<name>.tempstate<32 hex digits>``, included: under the lock no live save of the prefix
has any) and ``.previous`` files once ``prefix.index`` exists again; of any prefix in the
directory (and of its ``checkpoint`` file), the temporary files whose writer is provably
dead: written on this host by a process id that no process has now.  A live writer's files
are never removed (its pid runs), nor another host's (its pids cannot be checked here),
nor files of a pid that was reused (it runs): they wait for a later save.  Only regular
files (and links) are removed: a directory of such a name is left alone.

What it assumes: a rename within a directory is atomic (POSIX, and NTFS's ``MoveFileEx``);
machines (and containers) that share a directory have host names of their own; a killed
writer has been reaped by its parent (a zombie's pid still runs); the file system honours
``flock`` (local disks; NFS since Linux 2.6.12, as POSIX locks).  Where it does not, or
outside POSIX, saves of one prefix are not serialized: one program saves a prefix at a
time, as with TensorFlow's ``Saver``.  Outside POSIX, where a pid cannot be probed
without side effects, no other prefix's file is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import stat
import uuid
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from io import FileIO
from pathlib import Path
from types import ModuleType

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

PREVIOUS = ".previous"
LOCK = ".lock"
#: What a lock file holds while its save runs: how a stale one is known for ours.
_MARK = b"funcgrad: a save of this checkpoint holds this lock\n"
#: A data file's name after its prefix's.
_DATA = r"\.data-\d{5}-of-\d{5}"
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


def _directory_error(path: str) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{path} is a directory where the checkpoint's file goes; remove it, or save to "
        "another prefix."
    )


@contextlib.contextmanager
def locked(prefix: str) -> Iterator[None]:
    """Hold ``prefix``'s lock (the design note): wait for another save of ``prefix`` to
    end, and keep the next one waiting until this block ends."""
    path = prefix + LOCK
    fd = _lock(path)
    try:
        yield
    finally:
        if fd is not None:
            Path(path).unlink(missing_ok=True)  # while held: a waiter sees it was replaced
            os.close(fd)


def _lock(path: str) -> int | None:
    """A descriptor of ``path`` holding its exclusive ``flock``; ``None`` where there is no
    ``flock`` (not POSIX, or a file system without locks)."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError:
            raise _directory_error(path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # ENOLCK, EOPNOTSUPP: no locks here
            os.close(fd)
            return None
        if _current(fd, path):
            os.ftruncate(fd, 0)
            os.write(fd, _MARK)
            return fd
        os.close(fd)  # its holder removed it while we waited: lock the new one


def _current(fd: int, path: str) -> bool:
    """Whether ``fd`` is the file ``path`` names now."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _remove_stale_lock(path: str) -> None:
    """Remove ``path`` if it is a lock file of a killed save: ours (:data:`_MARK`), and
    held by nobody (taken here without waiting, then removed while held)."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _current(fd, path) and os.pread(fd, len(_MARK) + 1, 0) == _MARK:
            os.unlink(path)
    except OSError:  # held: a save runs
        pass
    finally:
        os.close(fd)


def _files(prefix: str) -> list[tuple[str, str]]:
    """``(name, path)`` of each entry in ``prefix``'s directory."""
    directory = os.path.dirname(prefix) or "."
    with os.scandir(directory) as entries:
        return [(e.name, os.path.join(os.path.dirname(prefix), e.name)) for e in entries]


def data_files(prefix: str) -> list[str]:
    """The data files of ``prefix`` there are, of any number of shards."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + _DATA)
    return sorted(path for name, path in _files(prefix) if pattern.fullmatch(name))


def remove_leftovers(prefix: str, files: Iterable[str]) -> None:
    """Remove what killed saves left (the design note): this prefix's temporary files, and
    its ``.previous`` files when its index exists; and the temporary files of any prefix in
    the directory whose writer is dead (:func:`_dead`).  Refuse first, before anything is
    written, a directory where one of ``files`` (the checkpoint's to be) goes.  Call it
    holding :func:`locked`."""
    for path in files:
        if os.path.isdir(path):
            raise _directory_error(path)
    base = re.escape(os.path.basename(prefix))
    ours = re.compile(f"{base}(?:\\.index|{_DATA})(?:{re.escape(PREVIOUS)})?{_TEMPORARY}")
    previous = re.compile(f"{base}(?:\\.index|{_DATA}){re.escape(PREVIOUS)}")
    done = os.path.lexists(prefix + ".index")
    for name, path in _files(prefix):
        if name.endswith(LOCK) and name != os.path.basename(prefix) + LOCK:
            _remove_stale_lock(path)
            continue
        owner = _OWNED.fullmatch(name)
        if (
            ours.fullmatch(name)
            or (owner and _dead(int(owner.group(1)), owner.group(2)))
            or (done and previous.fullmatch(name))
        ) and not os.path.isdir(path):
            Path(path).unlink(missing_ok=True)


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


def replace(prefix: str, new_index: str, new_data: Mapping[str, str]) -> None:
    """Rename each new data file (final name to temporary name in ``new_data``), then
    ``new_index``, into place as ``prefix``'s checkpoint, the old one kept as ``.previous``
    files meanwhile (the module's design note).  Call it holding :func:`locked`."""
    index, old = prefix + ".index", data_files(prefix)
    directory = os.path.dirname(os.path.abspath(index))
    if os.path.lexists(index):
        for path in old:
            _keep(path, path + PREVIOUS)
        os.replace(index, index + PREVIOUS)
        _sync(directory)
    for path, temporary_path in new_data.items():
        os.replace(temporary_path, path)
    os.replace(new_index, index)
    _sync(directory)
    for path in old:
        if path not in new_data:  # of another number of shards: the new index names none
            Path(path).unlink(missing_ok=True)
    remove_leftovers(prefix, ())
