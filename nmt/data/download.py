"""Anki archives: fetching ``<lang>-eng.zip`` from manythings.org, verifying and unpacking.

A local zip works the same as a downloaded one: ``data.path`` may name the zip itself.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path

from nmt.core.errors import NmtError
from nmt.core.fileio import atomic_path
from nmt.core.progress import progress_bar

ANKI_URL = "https://www.manythings.org/anki/{lang}-eng.zip"
USER_AGENT = "nmt (Anki sentence-pair downloader)"  # the site refuses Python's default agent


def fetch(url: str, dest: Path, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (atomically, with a progress bar)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, atomic_path(dest) as tmp:
            total = int(response.headers.get("Content-Length") or 0) or None
            with (
                open(tmp, "wb") as out,
                progress_bar(total, dest.name, "B", unit_scale=True) as bar,
            ):
                for block in iter(lambda: response.read(1 << 16), b""):
                    out.write(block)
                    bar.update(len(block))
    except urllib.error.HTTPError as exc:
        raise NmtError(f"Download of {url} failed: HTTP {exc.code} {exc.reason}.") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NmtError(
            f"Download of {url} failed: {reason}. Download it by hand and set data.path to the zip."
        ) from None
    return dest


def anki_member(archive: zipfile.ZipFile, path: Path) -> str:
    """The sentence-pair file of an Anki archive: the one .txt that is not _about.txt."""
    names = [n for n in archive.namelist() if n.endswith(".txt") and not Path(n).name.startswith("_")]
    if len(names) != 1:
        raise NmtError(
            f"{path} should hold one sentence-pair .txt file (besides _about.txt); it holds {names or 'none'}."
        )
    return names[0]


# The largest Anki export (English-French, 230 k pairs) unpacks to about 40 MB; a member's header
# may lie about its size, so the bytes are counted as they are written, too.
MAX_UNPACKED_BYTES = 500 * 10**6


def copy_at_most(source, out, limit: int, error: NmtError) -> None:
    written = 0
    for block in iter(lambda: source.read(1 << 20), b""):
        written += len(block)
        if written > limit:
            raise error
        out.write(block)


def tsv_file(path: Path, unpack_dir: Path) -> Path:
    """The TSV to read for ``path``: itself, or an Anki zip's pair file, verified and unpacked
    into ``unpack_dir``."""
    return unpack(path, unpack_dir) if path.suffix.lower() == ".zip" else path


def unpack(zip_path: Path, dest_dir: Path) -> Path:
    """Verify ``zip_path`` (every member's CRC) and extract its sentence-pair file into ``dest_dir``."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            broken = archive.testzip()
            if broken is not None:
                raise NmtError(f"{zip_path} is corrupt: member {broken} fails its checksum. Download it again.")
            member = anki_member(archive, zip_path)
            target = dest_dir / Path(member).name
            too_big = NmtError(
                f"{zip_path}: {member} unpacks to more than {MAX_UNPACKED_BYTES // 10**6:,} MB, far beyond any Anki "
                "export: refused (a zip bomb, or not an Anki archive)."
            )
            if archive.getinfo(member).file_size > MAX_UNPACKED_BYTES:
                raise too_big
            with archive.open(member) as source, atomic_path(target) as tmp, open(tmp, "wb") as out:
                copy_at_most(source, out, MAX_UNPACKED_BYTES, too_big)
    except zlib.error as exc:
        raise NmtError(
            f"{zip_path} is corrupt: its compressed data does not decompress ({exc}). Download it again."
        ) from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise NmtError(f"{zip_path} is not a valid zip archive ({exc}). Download it again.") from None
    return target


def download_anki(lang: str, dest_dir: Path, url: str | None = None) -> Path:
    """Fetch ``<lang>-eng.zip`` into ``dest_dir`` and return its path (verified by ``unpack`` later)."""
    if not lang.isalpha():
        raise NmtError(f"--download expects a language code such as 'mar' or 'fra', got {lang!r}.")
    return fetch((url or ANKI_URL).format(lang=lang), dest_dir / f"{lang}-eng.zip")
