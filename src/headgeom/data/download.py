"""Where datasets live on disk, and fetching the official CIFAR archives.

The archives and their md5 checksums are those published by the dataset authors at
https://www.cs.toronto.edu/~kriz/cifar.html (the same checksums torchvision verifies).
A download is streamed to a temporary file next to its destination, checked, extracted into
a temporary folder with every member vetted (no absolute paths, no ``..``, no links), and
only then renamed into place, so an interrupted run never leaves a half-written dataset.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from headgeom.io import absent_folders, remove_empty_folders

__all__ = [
    "CIFAR_ARCHIVES",
    "DATA_ENV_VAR",
    "DEFAULT_DATA_DIR",
    "Archive",
    "download_and_extract",
    "download_cifar",
    "fetch_url",
    "md5_file",
    "resolve_data_dir",
    "safe_extract",
]

DATA_ENV_VAR = "HEADGEOM_DATA"
DEFAULT_DATA_DIR = "~/.cache/headgeom/data"
_CHUNK = 1 << 20


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: ``data_dir`` if given, else ``$HEADGEOM_DATA``, else
    ``~/.cache/headgeom/data`` (``~`` expanded; the directory need not exist)."""
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_ENV_VAR, "")
    if env:
        return Path(env).expanduser()
    return Path(DEFAULT_DATA_DIR).expanduser()


@dataclass(frozen=True)
class Archive:
    """One official archive: where it is, its md5, the folder it extracts to, its size."""

    url: str
    md5: str
    folder: str
    size: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


_KRIZ = "https://www.cs.toronto.edu/~kriz/"
CIFAR_ARCHIVES: dict[tuple[str, str], Archive] = {
    ("cifar10", "python"): Archive(_KRIZ + "cifar-10-python.tar.gz",
                                   "c58f30108f718f92721af3b95e74349a", "cifar-10-batches-py",
                                   170_498_071),
    ("cifar10", "binary"): Archive(_KRIZ + "cifar-10-binary.tar.gz",
                                   "c32a1d4ab5d03f1284b67883e8d87530", "cifar-10-batches-bin",
                                   170_052_171),
    ("cifar100", "python"): Archive(_KRIZ + "cifar-100-python.tar.gz",
                                    "eb9058c3a382ffc7106e4002c42a8d85", "cifar-100-python",
                                    169_001_437),
    ("cifar100", "binary"): Archive(_KRIZ + "cifar-100-binary.tar.gz",
                                    "03b5dce01913d631647c71ecec9e9cb8", "cifar-100-binary",
                                    168_513_733),
}


def md5_file(path: str | os.PathLike[str]) -> str:
    """Hex md5 of a file, read in 1 MiB chunks."""
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _unreachable(url: str, err: BaseException, hint: str) -> RuntimeError:
    reason = getattr(err, "reason", None) or err
    return RuntimeError(f"could not reach {url} ({reason}). {hint}".rstrip())


def fetch_url(url: str, dest: str | os.PathLike[str], md5: str | None = None, *,
              timeout: float = 60.0, hint: str = "", sha256: str | None = None) -> Path:
    """Stream ``url`` to ``dest``: temp file in the same folder, checksum, atomic rename.

    The checksum is ``sha256`` when given (the authors' released results,
    headgeom.released.fetch), else ``md5`` (the CIFAR archives), else none.
    Raises RuntimeError (with ``hint`` appended) when the URL cannot be reached, ValueError
    when the checksum differs; in both cases nothing is left at ``dest``.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        algorithm, expected = ("sha256", sha256) if sha256 is not None else ("md5", md5)
        digest = hashlib.new(algorithm)
        with os.fdopen(fd, "wb") as out:
            try:
                response = urllib.request.urlopen(url, timeout=timeout)
            except (OSError, http.client.HTTPException, ValueError) as err:
                raise _unreachable(url, err, hint) from err
            with response:
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except (OSError, http.client.HTTPException) as err:
                        raise _unreachable(url, err, hint) from err
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
        if expected is not None and digest.hexdigest() != expected.lower():
            raise ValueError(
                f"checksum mismatch for {url}: {algorithm} {digest.hexdigest()} (size "
                f"{tmp.stat().st_size} bytes), expected {expected}; the download is corrupt or "
                f"the file changed upstream. Nothing was written to {dest}; try again."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _is_unsafe_name(name: str) -> bool:
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    return (posix.is_absolute() or windows.is_absolute() or bool(windows.drive)
            or name.startswith(("/", "\\")) or ".." in posix.parts or ".." in windows.parts)


def safe_extract(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> list[str]:
    """Extract a tar archive into ``dest`` after vetting every member.

    Refuses (ValueError, nothing extracted) members with absolute paths, ``..`` components,
    links or device files. Returns the member names.
    """
    archive, dest = Path(archive), Path(dest)
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as err:
        raise ValueError(f"{archive} is not a readable tar archive ({err})") from err
    with tar:
        members = tar.getmembers()
        for member in members:
            if _is_unsafe_name(member.name):
                raise ValueError(
                    f"refusing to extract {archive}: member {member.name!r} has an absolute "
                    f"path or a '..' component and would land outside {dest}"
                )
            if not (member.isfile() or member.isdir()):
                raise ValueError(
                    f"refusing to extract {archive}: member {member.name!r} is a link or a "
                    f"special file; dataset archives hold only files and folders"
                )
        dest.mkdir(parents=True, exist_ok=True)
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **extra)
    return [m.name for m in members]


def download_and_extract(url: str, md5: str, data_dir: str | os.PathLike[str], folder: str, *,
                         timeout: float = 60.0, keep_archive: bool = False) -> Path:
    """Fetch a tar archive that unpacks to ``folder`` and place it at ``data_dir/folder``.

    Returns at once if ``data_dir/folder`` exists. A verified archive already sitting in
    ``data_dir`` is reused. The folder appears only complete (extracted elsewhere, renamed).
    """
    data_dir = Path(data_dir).expanduser()
    target = data_dir / folder
    if target.is_dir():
        return target
    created = absent_folders(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    archive = data_dir / url.rsplit("/", 1)[-1]
    hint = (f"If this machine is offline, download {url} elsewhere, extract it, and place the "
            f"extracted folder at {target} (or pass --data-dir DIR / set {DATA_ENV_VAR}=DIR "
            f"to the directory that holds {folder}/).")
    if not (archive.is_file() and md5_file(archive) == md5.lower()):
        try:
            fetch_url(url, archive, md5, timeout=timeout, hint=hint)
        except BaseException:
            remove_empty_folders(created)  # an offline fetch leaves no empty data folder behind
            raise
    staging = Path(tempfile.mkdtemp(prefix=f".{folder}.", dir=data_dir))
    try:
        safe_extract(archive, staging)
        extracted = staging / folder
        if not extracted.is_dir():
            found = sorted(p.name for p in staging.iterdir())
            raise ValueError(f"{archive} did not unpack to {folder}/; its top level holds {found}")
        try:
            os.replace(extracted, target)
        except OSError:
            if not target.is_dir():  # another process may have finished first; else re-raise
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not keep_archive:
        archive.unlink(missing_ok=True)
    return target


def download_cifar(name: str, data_dir: str | os.PathLike[str] | None = None,
                   layout: str = "binary", *, timeout: float = 60.0) -> Path:
    """Download and extract official CIFAR-10/100 (``layout`` "binary" or "python").

    The binary layout is the default because reading it needs no unpickling at all.
    Returns the extracted folder, e.g. ``DATA_DIR/cifar-10-batches-bin``.
    """
    key = (name, layout)
    if key not in CIFAR_ARCHIVES:
        names = sorted({n for n, _ in CIFAR_ARCHIVES})
        layouts = sorted({lay for _, lay in CIFAR_ARCHIVES})
        raise ValueError(f"no official archive for name={name!r}, layout={layout!r}; "
                         f"names: {names}, layouts: {layouts}")
    spec = CIFAR_ARCHIVES[key]
    return download_and_extract(spec.url, spec.md5, resolve_data_dir(data_dir), spec.folder,
                                timeout=timeout)
