"""The integrity of a package's files: each file ``nmt export`` writes for an engine to read (the
weights, the ONNX graphs, the CTranslate2 folder) is hashed into the manifest's ``files_sha256``,
and checked before any loader sees it. A native loader (CTranslate2's C++, onnxruntime) trusts
its file: two edited bytes of a CTranslate2 ``model.bin`` aborted the whole process with heap
corruption. A link, a file the export did not write, or a changed byte is refused naming the file.

Packages exported before the hashes were recorded load as they did (their weights are checked
for consistency with the config, nmt/runtime/loading.py); a CTranslate2 folder is refused there,
since nothing else stands between it and the C++ loader.
"""

from __future__ import annotations

from pathlib import Path

from nmt.core.errors import NmtError
from nmt.core.fileio import refuse_link, sha256_file

MANIFEST_KEY = "files_sha256"  # relative path (with "/") -> sha256 of the file, as exported


def file_hashes(root: Path, paths: list[Path]) -> dict[str, str]:
    """What the manifest records of ``paths`` (files under ``root``): their hashes by relative path."""
    return {path.relative_to(root).as_posix(): sha256_file(path) for path in sorted(paths)}


def files_under(folder: Path) -> list[Path]:
    """Every file of an exported folder (the export writes plain files in plain folders)."""
    return [path for path in sorted(folder.rglob("*")) if path.is_file()]


def recorded_hashes(manifest: dict, source: Path) -> dict[str, str] | None:
    """The manifest's hashes (None: exported before they were recorded), checked for shape."""
    hashes = manifest.get(MANIFEST_KEY)
    if hashes is None:
        return None
    if not isinstance(hashes, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()):
        raise NmtError(f"{source}: {MANIFEST_KEY} must map file names to sha256 hashes: export the model again.")
    return hashes


def check_file(root: Path, manifest: dict, relative: str) -> None:
    """``root``/``relative`` is the file the export wrote: no link on the way, and its recorded
    hash (where the manifest records hashes at all)."""
    path = _no_links(root, relative)
    hashes = recorded_hashes(manifest, root / "manifest.json")
    if hashes is None:
        return
    if relative not in hashes:
        raise NmtError(f"{path} was not written by `nmt export` (the manifest records no hash of it).")
    if not path.is_file():
        raise NmtError(f"{path} is missing: the package is incomplete, export the model again.")
    if sha256_file(path) != hashes[relative]:
        raise NmtError(f"{path} is not the file `nmt export` wrote (its sha256 differs): export the model again.")


def check_folder(root: Path, manifest: dict, folder: str, what: str) -> None:
    """Every file of ``root``/``folder`` is one the export wrote, unchanged, and none is missing;
    no link anywhere in it. Refused where the manifest records no hashes: ``what`` (a native
    loader) reads the folder unchecked otherwise."""
    hashes = recorded_hashes(manifest, root / "manifest.json")
    if hashes is None:
        raise NmtError(
            f"{root / folder} was exported before packages recorded their files' hashes, and {what} would read it "
            f"unchecked: export the model again (`nmt export RUN PKG --{folder}`)."
        )
    base = _no_links(root, folder)
    if not base.is_dir():
        raise NmtError(f"{base} is missing: the package is incomplete, export the model again.")
    expected = {name for name in hashes if name.startswith(f"{folder}/")}
    for path in sorted(base.rglob("*")):
        refuse_link(path)
        if path.is_dir():
            continue
        relative = path.relative_to(root).as_posix()
        if relative not in expected:
            raise NmtError(f"{path} was not written by `nmt export` (the manifest records no hash of it).")
    for relative in sorted(expected):
        check_file(root, manifest, relative)


def _no_links(root: Path, relative: str) -> Path:
    """``root``/``relative`` with no symbolic link from ``root`` down to it (each part checked)."""
    current = root
    for part in Path(relative).parts:
        if part in ("..", "/"):
            raise NmtError(f"{root}: the manifest names a file outside the package ({relative}).")
        current = current / part
        refuse_link(current)
    return current
