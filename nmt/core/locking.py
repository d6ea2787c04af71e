"""One command at a time in a folder: an advisory lock on ``FOLDER/.lock``.

The commands that write into a run (prepare, train and each of its members, export, average,
tune) hold its lock while they run; a second one is refused at once, naming the holder's
process and command, instead of both writing the same files and both saying they succeeded.
The lock is ``flock``'s: the operating system releases it when its holder ends, however it
ends (``kill -9`` included), so a lock is never left behind; the file itself stays, holding the
last holder's PID and command for the message. Readers (translate, evaluate, serve) take none.
A hold is per process: a command holds its run, and the pipeline it calls may hold it again
(``flock`` would refuse a process its own lock taken through a second descriptor). Where
``fcntl`` does not exist (Windows) there is no lock.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nmt.core.errors import NmtError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"
_held: set[Path] = set()  # the folders this process holds: a second hold of one is part of the first


@contextmanager
def holding(folder: str | Path, command: str, create: bool = True) -> Iterator[None]:
    """Hold ``folder``'s lock for the block; ``NmtError`` at once if another process holds it.
    The folder is made if needed (``create``); a folder that is missing (with ``create=False``)
    or that this user cannot write (a downloaded run on a read-only disk, which a command can
    only read) is not locked."""
    folder = Path(folder)
    if fcntl is None or (not create and not folder.is_dir()):
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    key = folder.resolve()
    if key in _held:  # this process holds it already (a command, then the pipeline it calls)
        yield
        return
    fd = _open(folder / LOCK_NAME)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NmtError(
                f"{folder} is in use by {holder(fd)}: one command at a time may write into it. Wait until it "
                "ends (or stop it), then run this command again. Nothing was changed."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)
    finally:
        os.close(fd)  # releases the lock


def _open(path: Path) -> int | None:
    """The lock file, opened for writing; None where this user cannot write the folder."""
    try:  # O_NONBLOCK: a FIFO put there must not hold the command at its open
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0), 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:  # never written through: it could point at any file of yours
            raise NmtError(f"{path} is a symbolic link: a run folder holds its own files.") from None
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENXIO):
            if error.errno == errno.ENXIO:  # a FIFO or socket no one reads
                raise NmtError(f"{path} is not a file: a run folder's lock is a file nmt writes. Remove it.") from None
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a device: nothing to lock or write
        os.close(fd)
        raise NmtError(f"{path} is not a file: a run folder's lock is a file nmt writes. Remove it.")
    return fd


def holder(fd: int) -> str:
    """Who holds the lock, as its file says: "process PID (COMMAND)"."""
    text = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip()
    pid, _, command = text.partition(" ")
    return f"process {pid} ({command})" if pid.isdigit() else "another process"
