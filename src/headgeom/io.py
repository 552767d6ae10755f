"""Atomic writes: a result file is either the old one or the complete new one, never half; and a
write that fails leaves none of the empty folders it created (:func:`absent_folders`)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any


def json_safe(x: Any) -> Any:
    """``x`` as plain JSON types, headgeom's one convention for JSON files (every writer goes
    through it, every reader parses it back with :func:`json_number`):

    - NaN is written as null and ±inf as the strings "inf"/"-inf" (strict JSON, ``allow_nan=False``);
    - numpy/torch scalars and arrays become numbers and lists, dataclasses dicts, tuples and sets
      lists (sets sorted), paths strings, dict keys strings.

    Raises TypeError for an object with no JSON form."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in (sorted(x, key=repr) if isinstance(x, (set, frozenset)) else x)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return json_safe(dataclasses.asdict(x))
    if isinstance(x, PurePath):
        return str(x)
    if hasattr(x, "tolist") and callable(x.tolist):  # numpy arrays/scalars, torch tensors
        return json_safe(x.tolist())
    if hasattr(x, "item") and callable(x.item):
        return json_safe(x.item())
    raise TypeError(f"value {x!r} of type {type(x).__name__} cannot be written as JSON; "
                    "give numbers, strings, lists, dicts, dataclasses or arrays")


def json_number(x: Any) -> float:
    """A number written by :func:`json_safe` back to float: null -> NaN, "inf"/"-inf" -> ±inf.
    Raises ValueError for any other string."""
    if x is None:
        return math.nan
    if isinstance(x, str):
        if x not in ("inf", "-inf"):
            raise ValueError(f"{x!r} is not a number headgeom writes (numbers, null for NaN, \"inf\"/\"-inf\")")
        return float(x)
    return float(x)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomic UTF-8 text write (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """``obj`` through :func:`json_safe` (NaN as null, ±inf as "inf"/"-inf"), indented."""
    return atomic_write_text(path, json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n")


def absent_folders(folder: str | os.PathLike) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first: what creating
    ``folder`` will create, for :func:`remove_empty_folders` to take back when the work fails."""
    out, p = [], Path(folder)
    while not p.exists() and not p.is_symlink() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first, as :func:`absent_folders` lists them) while they are empty;
    the first one that is not (or is gone) is kept with everything above it."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
