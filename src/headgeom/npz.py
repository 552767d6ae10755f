"""Untrusted ``.npz`` archives read without unpickling: every array with ``allow_pickle=False``, and
every way a damaged archive fails (numpy's header parser, zipfile's member headers, a bad compressed
stream) turned into one line of the caller's error type. The one home of that reading, for the orbit
embeddings of ``headgeom analyze`` (:mod:`headgeom.orbits.external`) and the authors' released arrays
(:mod:`headgeom.released.files`).
"""
from __future__ import annotations

import lzma
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

__all__ = ["DAMAGED_MEMBER", "read_npz"]

# what numpy and zipfile raise on a damaged archive or member: besides BadZipFile and EOFError, a flipped
# flag or method field gives RuntimeError ("encrypted") or NotImplementedError (a RuntimeError), a bad
# deflate stream zlib.error, a bad lzma one LZMAError, and numpy parsing a damaged .npy header as a Python
# literal SyntaxError or tokenize.TokenError
DAMAGED_MEMBER = (OSError, EOFError, zipfile.BadZipFile, RuntimeError, zlib.error, lzma.LZMAError,
                  SyntaxError, tokenize.TokenError)


def read_npz(path: Path, error: type[Exception], *, unreadable: str, single: str, damaged: str,
             object_array: str) -> dict[str, np.ndarray]:
    """Every array of the archive at ``path``; ``error`` (one line) when it cannot be read. The messages:
    "{path} is not a readable .npz archive ({err}); {unreadable}", "{path} holds a single array, {single}",
    "{path}: array {name!r} cannot be read ({err}); {damaged}" and "{path}: array {name!r} is an object
    array (pickled Python objects), which headgeom never unpickles; {object_array}"."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, *DAMAGED_MEMBER) as err:
        raise error(f"{path} is not a readable .npz archive ({err}); {unreadable}") from err
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise error(f"{path} holds a single array, {single}")
    out: dict[str, np.ndarray] = {}
    with archive:
        for name in archive.files:
            try:
                out[name] = archive[name]
            except ValueError as err:
                if "allow_pickle" not in str(err):  # a damaged .npy header or a short data block
                    raise error(f"{path}: array {name!r} cannot be read ({err}); {damaged}") from err
                # allow_pickle=False refuses object arrays
                raise error(f"{path}: array {name!r} is an object array (pickled Python objects), which "
                            f"headgeom never unpickles; {object_array}") from err
            except DAMAGED_MEMBER as err:
                raise error(f"{path}: array {name!r} cannot be read ({err}); {damaged}") from err
    return out
