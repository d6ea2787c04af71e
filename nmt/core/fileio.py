"""Small file helpers: atomic writes and hashes. Every text file is UTF-8, explicitly."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from nmt.core.errors import NmtError

BOM = b"\xef\xbb\xbf"


def _current_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: set it straight back
    os.umask(mask)
    return mask


UMASK = _current_umask()  # read once, at import (before any thread could race the two calls)


def as_umask_allows(path: str | Path, directory: bool = False) -> None:
    """Give ``path`` the mode a plain open() or mkdir() would have: temporary files and folders
    are made private (0600, 0700), and renamed into place they would stay so, whatever the umask
    says the user wants (a run's files 0600 under umask 022, before)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~UMASK)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``.

    A crash or exception leaves ``path`` as it was (absent or the previous version).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        as_umask_allows(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_text_writer(path: str | Path) -> Iterator[IO[str]]:
    """Open a UTF-8 text file for writing that appears at ``path`` only when complete."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        yield handle


TEMPORARY_GLOB = ".*.tmp"  # atomic_path's temporaries: ".NAME.XXXXXXXX.tmp"


@contextmanager
def staged_folder(out_dir: str | Path) -> Iterator[Path]:
    """A folder written in full under a temporary name beside ``out_dir`` (which must not exist,
    or be empty), then renamed to it: a reader sees the whole folder or none, and a failure
    leaves nothing behind. Its permissions are what the umask allows (mkdtemp's are 0700)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    as_umask_allows(staging, directory=True)
    try:
        yield staging
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def remove_temporaries(folder: str | Path) -> int:
    """Remove what atomic writes that were killed left in ``folder`` (not its subfolders); the
    caller holds the folder (nmt/core/locking.py), so no write of another command is in flight.
    Returns how many files were removed."""
    removed = 0
    for path in Path(folder).glob(TEMPORARY_GLOB):
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_text_writer(path) as handle:
        handle.write(text)


def write_lines_atomic(path: str | Path, lines: Iterable[str]) -> None:
    with atomic_text_writer(path) as handle:
        for line in lines:
            handle.write(line + "\n")


def save_atomic(path: str | Path, writer: Callable[[Path], object]) -> None:
    """Call ``writer(tmp_path)`` and move the result to ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)


def disk_full(error: BaseException | None) -> OSError | None:
    """The "no space left" (or over quota) error ``error`` is or was raised from, if any: a
    library that wraps it (an exporter, a serializer) would otherwise have it read as its own
    failure."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def refuse_link(path: str | Path) -> None:
    """A symbolic link in a shared run or package could make us read (and pass on) any file."""
    if Path(path).is_symlink():
        raise NmtError(f"{path} is a symbolic link: a run directory or a model package holds its own files.")


LINK_REFUSED = "nmt writes a run's files in the run's own folders, never through a link: remove the link"


def refuse_links_under(root: str | Path, path: str | Path) -> None:
    """Refuse to write ``path`` when it, or a folder between ``root`` and it, is a symbolic link
    (a crafted run folder's ``eval`` linked elsewhere would have a command write there). A
    path outside ``root`` is not this check's business."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise NmtError(f"{current} is a symbolic link: {LINK_REFUSED} (or give another run_dir).")


@contextmanager
def appending(path: str | Path, newline: str | None = "\n") -> Iterator[IO[str]]:
    """A UTF-8 text file opened to append to, created if absent: never through a symbolic link
    (``O_NOFOLLOW``: refused with an error naming it, where opening would have written its target)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP or Path(path).is_symlink():
            raise NmtError(f"{path} is a symbolic link: {LINK_REFUSED}.") from None
        raise
    with open(fd, "a", encoding="utf-8", newline=newline) as handle:
        yield handle


def create_new(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path``, which must not exist: not as a file, nor as a link (a dangling
    one included: it would be written through)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        kind = "a symbolic link" if Path(path).is_symlink() else "there"
        raise NmtError(f"{path} is {kind}: nothing is written over or through it.") from None
    with open(fd, "wb") as handle:
        handle.write(data)


def fsync_file(path: str | Path) -> None:
    """Flush a file another library wrote to the disk (before a rename publishes it)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def split_lines(text: str) -> list[str]:
    """Split on LF only (a CR before it is dropped), so no other character ends a line.

    ``str.splitlines`` would also split on U+2028, form feeds and lone CRs, and change the
    line count. A final line ending does not start an extra empty line.
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: str | Path, errors: str = "strict") -> list[str]:
    """Lines of a UTF-8 file (a leading BOM is dropped), without their LF/CRLF endings."""
    with open(path, "rb") as handle:
        return split_lines(handle.read().decode("utf-8", errors=errors).removeprefix("\ufeff"))


def count_lines(path: str | Path) -> int:
    """How many lines a file has (a last line without an ending counts), read in blocks."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


@dataclass
class LineEnds:
    """What ``binary_lines`` saw of a file's line endings."""

    lone_cr: int = 0  # line breaks that were a carriage return alone (classic Mac, or a mixed file)


def binary_lines(handle: BinaryIO, ends: LineEnds | None = None) -> Iterator[bytes]:
    """A binary file's lines without their endings, a leading byte-order mark dropped, read as
    they come (never the whole file at once). LF, CRLF and a lone CR each end a line, as in
    Python's universal newlines: a CR inside a line would otherwise glue two pairs into one
    (``S2<TAB>T2<CR>S3<TAB>T3`` read as the pair S2, "T2 S3"). ``ends`` counts the lone CRs."""
    for index, line in enumerate(handle):
        if index == 0:
            line = line.removeprefix(BOM)
            if not line:  # the file is a byte-order mark and nothing else
                return
        ended = line.endswith(b"\n")
        line = line.removesuffix(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
            if not ended and ends is not None:  # the file's last line, ended by a lone CR
                ends.lone_cr += 1
        if b"\r" not in line:
            yield line
            continue
        parts = line.split(b"\r")
        if ends is not None:
            ends.lone_cr += len(parts) - 1
        yield from parts


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 file one at a time, split on LF only (as ``read_lines``)."""
    with open(path, "rb") as handle:
        for line in binary_lines(handle):
            yield line.decode("utf-8")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
