"""Reading one released file into plain data, without executing pickled code (docs/paper.md §3.8).

Two containers occur:

- ``.npy`` written by ``numpy.save`` of a dict (collapse, guillotine, curvature, orbit files): an
  ``.npy`` header saying "shape (), dtype object", then a pickle of the dict. The header is
  parsed by numpy's own header reader (a Python literal, no code); the pickle is read with
  headgeom's one unpickler for plain data, :class:`headgeom.data.safe_pickle.SafeUnpickler`, which
  rebuilds only numpy arrays, dtypes, scalars and builtin containers and refuses every other
  global (``os.system``, ``builtins.eval``, any class) before calling anything.
- ``.npz`` written by ``numpy.savez`` (Hessian tracks, depth ablations): read with
  ``numpy.load(allow_pickle=False)``; an object array, which only pickle can hold, is refused.

Every problem raises :class:`headgeom.released.manifest.ReleasedFileError`, one line naming the
file. The key and shape checks of each file kind are :func:`require_keys` and :func:`array`.
"""
from __future__ import annotations

import pickle
import struct
import tokenize
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from headgeom.data.safe_pickle import SafeUnpickler, UnsafePickleError
from headgeom.npz import read_npz as read_arrays
from headgeom.released.manifest import ReleasedFileError

__all__ = ["array", "read_npy_dict", "read_npz", "require_keys", "scalar"]

_DAMAGED = "the file is damaged or not the authors' file; fetch it again"


def read_npy_dict(path: str | Path) -> dict[str, Any]:
    """The dict a ``numpy.save(path, dict)`` file holds, read without running pickled code."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            try:
                version = np.lib.format.read_magic(fh)
                header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)
                shape, _, dtype = header(fh)
            except (ValueError, EOFError, SyntaxError, tokenize.TokenError) as err:
                raise ReleasedFileError(f"{path} is not an .npy file ({err}); {_DAMAGED}") from err
            if shape != () or dtype != np.dtype(object):
                raise ReleasedFileError(f"{path} holds a {dtype} array of shape {shape}, not a saved dict "
                                        f"(shape (), dtype object); {_DAMAGED}")
            try:
                obj = SafeUnpickler(fh, encoding="latin1").load()
            except UnsafePickleError as err:
                raise ReleasedFileError(f"{path}: {err}") from None
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                    IndexError, KeyError, MemoryError, OverflowError, struct.error) as err:  # OverflowError: a damaged FRAME length
                said = " ".join(str(err).split())  # the C unpickler's messages may span lines
                raise ReleasedFileError(f"{path}: its pickle cannot be read ({type(err).__name__}: "
                                        f"{said}); it is probably truncated; {_DAMAGED}") from err
    except OSError as err:
        raise ReleasedFileError(f"{path} cannot be read ({err})") from err
    value = obj.item() if isinstance(obj, np.ndarray) and obj.shape == () else obj
    if not isinstance(value, dict):
        raise ReleasedFileError(f"{path} holds a {type(value).__name__}, not a dict; {_DAMAGED}")
    return value


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``, read with ``allow_pickle=False`` (object arrays refused)."""
    return read_arrays(Path(path), ReleasedFileError, unreadable=_DAMAGED, single=f"not an .npz archive; {_DAMAGED}",
                       damaged=_DAMAGED, object_array=_DAMAGED)


def require_keys(path: str | Path, data: Mapping[str, Any], keys: Sequence[str], what: str = "") -> None:
    """Raise naming the first of ``keys`` missing from ``data`` (and what is there)."""
    missing = [k for k in keys if k not in data]
    if missing:
        where = f" {what}" if what else ""
        raise ReleasedFileError(f"{path}:{where} key {missing[0]!r} is missing ({len(missing)} of "
                                f"{len(keys)} expected keys missing; present: {sorted(map(str, data))}); "
                                f"{_DAMAGED}")


def array(path: str | Path, data: Mapping[str, Any], key: str, shape: Sequence[int | None],
          kinds: str = "f", what: str = "") -> np.ndarray:
    """``data[key]`` as an array of ``shape`` (None: any length) and dtype kind in ``kinds``."""
    value = np.asarray(data[key]) if not isinstance(data[key], np.ndarray) else data[key]
    where = f"{what} " if what else ""
    ok = value.ndim == len(shape) and all(s is None or s == v for s, v in zip(shape, value.shape))
    if not ok or value.dtype.kind not in kinds:
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ReleasedFileError(f"{path}: {where}{key!r} is a {value.dtype} array of shape {value.shape}, "
                                f"expected shape {want} of kind {kinds!r}; {_DAMAGED}")
    return value


def scalar(path: str | Path, data: Mapping[str, Any], key: str, kind: type, what: str = "") -> Any:
    """``data[key]`` as one number of ``kind`` (int or float), from a Python or numpy scalar."""
    value = data[key]
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        where = f"{what} " if what else ""
        raise ReleasedFileError(f"{path}: {where}{key!r} is {value!r}, expected one {kind.__name__}; {_DAMAGED}")
    return kind(value)
