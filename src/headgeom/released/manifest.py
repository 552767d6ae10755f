"""The pinned list of the authors' released result files, where a copy lives, and its checks
(docs/paper.md §3.8).

headgeom ships ``manifest.json`` (package data, beside this module): the upstream repository, the
commit the files were taken from, and every file's path, size and sha256. It was generated from
the ``MANIFEST.json`` of a verified copy (the files as the authors published them at that
commit); a test compares the two when a copy is present.

A copy is a folder holding the files under their upstream paths (``DIR/results/cifar10/...``).
Where it is: ``--released DIR``, else ``$HEADGEOM_RELEASED``, else the cache folder that
``headgeom released fetch`` fills when given no DIR (:func:`default_released_dir`:
``$XDG_CACHE_HOME/headgeom/released`` or ``~/.cache/headgeom/released``), so that a fetched copy is
found without an option or a variable. :func:`verify_file` checks one file
against its pinned size and sha256 before anything reads it, so a truncated, damaged or swapped
file is refused before a single byte of it is parsed.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from headgeom.runs.safe_load import file_sha256

__all__ = ["FETCH_COMMAND", "MANIFEST", "RELEASED_ENV", "Manifest", "ManifestEntry", "ReleasedFileError",
           "default_released_dir", "load_manifest", "resolve_released_dir", "verify_file"]

RELEASED_ENV = "HEADGEOM_RELEASED"
FETCH_COMMAND = "headgeom released fetch"
"""Downloads a copy into :func:`default_released_dir` (``headgeom released fetch DIR``: into DIR)."""


class ReleasedFileError(ValueError):
    """A released file is missing, damaged, of another version, or not in the expected layout;
    the message is one line naming the file, what is wrong and what to do."""


@dataclass(frozen=True)
class ManifestEntry:
    """One pinned file: its path under the copy's root (the upstream path), size and sha256."""

    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """The pinned files of one upstream commit."""

    source: str
    commit: str
    raw_url_pattern: str
    files: tuple[ManifestEntry, ...]

    def entry(self, path: str) -> ManifestEntry:
        """The entry of ``path`` (upstream path, e.g. ``results/cifar10/resnet18/curvature_results.npy``)."""
        for e in self.files:
            if e.path == path:
                return e
        raise ReleasedFileError(f"{path!r} is not one of the {len(self.files)} pinned released files of "
                                f"commit {self.commit[:12]}")

    def url(self, path: str) -> str:
        """The raw download address of ``path`` at the pinned commit."""
        return self.raw_url_pattern.replace("<commit>", self.commit).replace("<path>", path)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.files)


def _manifest_from(data: dict[str, Any], where: str) -> Manifest:
    try:
        files = tuple(ManifestEntry(str(f["path"]), int(f["bytes"]), str(f["sha256"]).lower())
                      for f in data["files"])
        return Manifest(str(data["source"]), str(data["commit"]), str(data["raw_url_pattern"]), files)
    except (KeyError, TypeError, ValueError) as err:
        raise ReleasedFileError(f"{where} is not a released-results manifest ({type(err).__name__}: {err}); "
                                f"it needs source, commit, raw_url_pattern and files [{{path, bytes, sha256}}]"
                                ) from err


def load_manifest(path: str | os.PathLike[str] | None = None) -> Manifest:
    """The manifest at ``path`` (a JSON file of the layout above), else the one headgeom ships."""
    if path is None:
        text = resources.files("headgeom.released").joinpath("manifest.json").read_text(encoding="utf-8")
        return _manifest_from(json.loads(text), "headgeom/released/manifest.json")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ReleasedFileError(f"{path}: cannot read the manifest ({err})") from err
    return _manifest_from(data, str(path))


MANIFEST = load_manifest()
"""The files headgeom reads, pinned to one upstream commit (``manifest.json``)."""


def default_released_dir() -> Path:
    """Where ``headgeom released fetch`` puts a copy when given no DIR, and where every command looks
    last: ``$XDG_CACHE_HOME/headgeom/released`` (an absolute path, as the XDG spec asks), else
    ``~/.cache/headgeom/released``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "headgeom" / "released"


def _incomplete(root: Path, manifest: Manifest) -> list[str]:
    """The pinned files missing under ``root`` (present ones are checked when read: :func:`verify_file`)."""
    return [e.path for e in manifest.files if not (root / e.path).is_file()]


def resolve_released_dir(directory: str | os.PathLike[str] | None = None, option: str = "--released DIR", *,
                         complete: bool = True) -> Path:
    """The copy's root: ``directory`` if given, else ``$HEADGEOM_RELEASED``, else the fetched copy in
    :func:`default_released_dir` when that folder exists; it must be a folder.

    ``option``: how the command's user gives ``directory`` (named in the messages). ``complete``: the
    copy in the cache folder must hold every pinned file (a fetch that stopped half-way says so and how
    to finish it, rather than failing later on its first missing file).
    """
    if directory is None or str(directory) == "":
        env = os.environ.get(RELEASED_ENV, "")
        if env:
            directory, how = env, f"${RELEASED_ENV}"
        else:
            return _cached_copy(option, complete)
    else:
        how = option.split()[0]
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ReleasedFileError(f"{how} {root} is not a folder; point it at the folder holding results/ "
                                f"(download it with `{FETCH_COMMAND} {root}`)")
    return root


def _cached_copy(option: str, complete: bool) -> Path:
    """The copy ``headgeom released fetch`` put in the cache folder, when there is one."""
    cache = default_released_dir()
    if not cache.is_dir():
        size = sum(e.bytes for e in MANIFEST.files) / 1e6
        raise ReleasedFileError(
            f"no copy of the authors' released results is set: pass {option} or set {RELEASED_ENV}=DIR, or "
            f"download one with `{FETCH_COMMAND}` ({size:.0f} MB into {cache}, where headgeom finds it; "
            f"`{FETCH_COMMAND} DIR` puts it elsewhere)")
    missing = _incomplete(cache, MANIFEST) if complete else []
    if missing:
        raise ReleasedFileError(
            f"the copy of the authors' released results in {cache} is incomplete ({len(missing)} of "
            f"{len(MANIFEST.files)} pinned files missing, first {missing[0]}): finish it with `{FETCH_COMMAND}`")
    return cache


def verify_file(root: str | os.PathLike[str], path: str, manifest: Manifest = MANIFEST) -> Path:
    """``root/path`` after checking its size and sha256 against ``manifest``; raises
    :class:`ReleasedFileError` (one line) when it is missing, truncated, or another file."""
    entry = manifest.entry(path)
    file = Path(root) / entry.path
    fix = f"replace it with the file pinned at commit {manifest.commit[:12]} (`{FETCH_COMMAND} {root}`)"
    if not file.is_file():
        raise ReleasedFileError(f"{file} is missing; {fix}")
    size = file.stat().st_size
    if size != entry.bytes:
        what = "truncated" if size < entry.bytes else "longer than the pinned file"
        raise ReleasedFileError(f"{file} is {size} bytes, the pinned file has {entry.bytes}: {what} or "
                                f"another version; {fix}")
    sha = file_sha256(file)
    if sha != entry.sha256:
        raise ReleasedFileError(f"{file} has sha256 {sha}, the pinned file has {entry.sha256}: damaged or "
                                f"another version; {fix}")
    return file
