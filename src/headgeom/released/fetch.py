"""``headgeom released fetch DIR``: download the pinned released files (docs/paper.md §3.8).

Every file of the manifest is fetched from the authors' repository at the pinned commit (raw
URLs) through headgeom's one downloader, :func:`headgeom.data.download.fetch_url`: streamed to a
temporary file beside its destination, its sha256 checked, then renamed into place, so a failed
or corrupt download leaves nothing at ``DIR/<path>``. A file already there with the pinned
sha256 is kept. Offline, the first unreachable URL stops the fetch with one line naming the
addresses and where to put the files.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from headgeom.data.download import fetch_url
from headgeom.io import absent_folders, remove_empty_folders
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError
from headgeom.runs.safe_load import file_sha256

__all__ = ["FetchResult", "fetch_released", "placement_hint"]


@dataclass(frozen=True)
class FetchResult:
    """What a fetch did: files downloaded now and files that were already there and intact."""

    root: Path
    downloaded: tuple[str, ...]
    kept: tuple[str, ...]


def placement_hint(root: str | Path, manifest: Manifest = MANIFEST) -> str:
    """Where the files come from and where they go, for a machine that cannot download them."""
    pattern = manifest.url("<path>")
    return (f"If this machine is offline, download the {len(manifest.files)} pinned files elsewhere from "
            f"{pattern} (first <path>: {manifest.files[0].path}; all are listed with their sha256 in "
            f"headgeom/released/manifest.json) and place each at {Path(root) / '<path>'}, then run "
            f"`headgeom released check {root}`.")


def _intact(file: Path, sha256: str) -> bool:
    return file.is_file() and file_sha256(file) == sha256


def fetch_released(root: str | Path, manifest: Manifest = MANIFEST, *, timeout: float = 60.0,
                   progress: Callable[[str], None] | None = None) -> FetchResult:
    """Download every pinned file missing or not intact under ``root``; returns what was done.

    Raises RuntimeError (one line, with :func:`placement_hint`) when a URL cannot be reached and
    ValueError when a download's sha256 differs from the pinned one (nothing written for it).
    """
    root = Path(root).expanduser()
    if root.exists() and not root.is_dir():
        raise ReleasedFileError(f"{root} is a file; give the folder to download the released results into")
    hint = placement_hint(root, manifest)
    downloaded, kept = [], []
    for entry in manifest.files:
        dest = root / entry.path
        if _intact(dest, entry.sha256):
            kept.append(entry.path)
            continue
        if progress is not None:
            progress(f"fetching {entry.path} ({entry.bytes} bytes)")
        new_dirs = absent_folders(dest.parent)
        try:
            fetch_url(manifest.url(entry.path), dest, timeout=timeout, hint=hint, sha256=entry.sha256)
        except BaseException:
            remove_empty_folders(new_dirs)  # a failed download leaves no empty folders behind either
            raise
        downloaded.append(entry.path)
    return FetchResult(root=root, downloaded=tuple(downloaded), kept=tuple(kept))

