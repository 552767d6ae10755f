"""Read torch checkpoints without executing pickled code (docs/paper.md §4, pitfall 10).

A ``.pth`` / ``.pth.tar`` file is a pickle (inside a zip since torch 1.6; a bare stream of
pickles before). Unpickling can call any importable function, so an untrusted checkpoint can
run code. ``safe_load`` reads one in two guarded steps:

1. **Scan**: every global the pickle names is listed with ``pickletools.genops`` (which parses
   opcodes and calls nothing) and checked against an allow-list. Tensors, storages, their
   rebuild functions, ``OrderedDict`` and plain containers pass as they are; numpy scalars and
   arrays pass as numpy's own constructors; ``argparse.Namespace`` (DINO's ``args``) becomes an
   :class:`InertNamespace`, and a function named ``exclude_bias_and_norm`` in any module
   (VICReg's optimizer state pickles ``__main__.exclude_bias_and_norm``) becomes an
   :class:`InertFunction`, without importing its module. Anything else raises
   :class:`UnsafeCheckpointError` naming the global, before any object is built.
2. **Load**: ``torch.load(weights_only=True)`` (torch's own restricted unpickler) under a
   ``torch.serialization.safe_globals`` context holding only the stand-ins the scan asked for,
   keyed by the exact path found in the file, so torch resolves them without an import.

The file's sha256 is computed on the way (see :mod:`headgeom.checkpoints.official`).

Every command that reads a checkpoint (``checkpoint``, ``analyze``, ``eval``, ``train --resume``)
reads it through :func:`safe_load`, so a missing, empty, truncated, damaged or foreign file, or a
pickle that would run code, gets the same one-line message whichever command met it.
"""
from __future__ import annotations

import _compat_pickle
import hashlib
import io
import lzma
import os
import pickle
import pickletools
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from headgeom.runs.folder import missing_checkpoint_message

__all__ = [
    "CheckpointFormatError", "UnsafeCheckpointError", "InertFunction", "InertNamespace",
    "LoadedFile", "file_sha256", "missing_checkpoint", "scan_globals", "safe_load", "STAND_IN_FUNCTIONS",
]

# torch.save's legacy (non-zip) stream starts with this magic number, pickled (serialization.py).
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_ZIP_MAGIC = b"PK\x03\x04"
_SCAN_LIMIT = 256 << 20  # a data.pkl larger than this is not a model checkpoint
_RESTORE = ("restore an intact copy (for a downloaded file, download it again and compare its sha256 with the "
            "official one)")

STAND_IN_FUNCTIONS = ("exclude_bias_and_norm",)
"""Function names mapped to :class:`InertFunction` whatever module the file says they live in."""


class UnsafeCheckpointError(pickle.UnpicklingError, ValueError):
    """The checkpoint's pickle names a global outside the allow-list; nothing was executed."""


class CheckpointFormatError(ValueError):
    """The file is not a readable torch checkpoint (truncated, damaged or another format)."""


@dataclass(frozen=True)
class InertFunction:
    """Stand-in for a pickled reference to a function (e.g. VICReg's ``exclude_bias_and_norm``).

    Remembers where the original lived; calling it raises instead of running anything.
    """

    module: str
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{self.module}.{self.name} is an inert stand-in made by headgeom.runs.safe_load "
            f"for a function reference found in a checkpoint; the original code was never imported. "
            f"Re-create the optimizer from your own code instead of calling it."
        )


class InertNamespace:
    """Stand-in for ``argparse.Namespace``: holds the pickled attributes as plain data.

    ``vars(ns)`` / ``ns.as_dict()`` give the dict; attribute access works as on a Namespace.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise pickle.UnpicklingError(
                f"argparse.Namespace state must be a dict with str keys, got {type(state).__name__}"
            )
        self.__dict__.update(state)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in sorted(self.__dict__.items()))
        return f"InertNamespace({inner})"


def _numpy_globals() -> dict[str, Any]:
    """numpy constructors that only build arrays, scalars and dtypes (numpy 1.x and 2.x paths)."""
    core = getattr(np, "_core", None) or np.core
    out: dict[str, Any] = {"numpy.dtype": np.dtype, "numpy.ndarray": np.ndarray}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out[f"{mod}.scalar"] = core.multiarray.scalar
        out[f"{mod}._reconstruct"] = core.multiarray._reconstruct
    for name in dir(getattr(np, "dtypes", object())):
        if name.endswith("DType"):
            out[f"numpy.dtypes.{name}"] = getattr(np.dtypes, name)
    return out


def _torch_globals() -> set[str]:
    """The globals ``torch.save`` writes for dense tensors, parameters and state dicts."""
    names = {
        "collections.OrderedDict", "torch.Size", "torch.device", "_codecs.encode",
        "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2",
        "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
        "torch.storage.UntypedStorage", "torch.storage.TypedStorage",
        "builtins.set", "builtins.bytearray", "builtins.complex",
    }
    names |= {f"torch.{cls.__name__}" for cls in torch._storage_classes}
    names |= {str(dt) for dt in vars(torch).values() if isinstance(dt, torch.dtype)}
    return names


_TORCH_NAMES = _torch_globals()
_NUMPY = _numpy_globals()


def _stand_in(full: str) -> Any | None:
    """The inert object for ``full`` ("module.name"), or None if it has none."""
    module, _, name = full.rpartition(".")
    if full == "argparse.Namespace":
        return InertNamespace
    if name in STAND_IN_FUNCTIONS and module:
        return InertFunction(module, name)
    return None


def _refusal(full: str, where: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"refusing to load {where}: its pickle references the global {full!r}, which is not on "
        f"headgeom's allow-list (tensors, storages, OrderedDict, plain containers, numpy arrays, "
        f"argparse.Namespace and functions named {', '.join(STAND_IN_FUNCTIONS)}). Unpickling it "
        f"could run code, so nothing was executed. If you trust the file, re-save its tensors "
        f"only: torch.save(state_dict, 'clean.pth') in an environment where you accept the risk."
    )


@dataclass(frozen=True)
class LoadedFile:
    """What :func:`safe_load` read: the object, the file's sha256 and what the pickle named."""

    obj: Any
    path: Path
    sha256: str
    size_bytes: int
    container: str  # "zip" (torch >= 1.6) or "legacy"
    global_names: tuple[str, ...]
    stand_ins: tuple[str, ...] = field(default=())


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of the file's bytes, read in ``chunk``-byte pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _py3_name(module: str, name: str) -> tuple[str, str]:
    """Python 2 names (``__builtin__.eval``) as Python 3 resolves them, exactly as torch's unpickler does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _globals_in_pickle(stream: io.BufferedIOBase | io.BytesIO, where: str) -> Iterator[tuple[str, Any]]:
    """Yield ("module.name", first_arg) for every global-naming opcode of one pickle in ``stream``.

    Parses opcodes only. STACK_GLOBAL / INST / OBJ (never written by torch.save, whose pickles
    are protocol 2) are refused outright, naming what they would reach where it can be told.
    Yields ("", value) once at the end with the value of a top-level int if the pickle is one.
    """
    strings: list[str] = []
    last_int: Any = None
    try:
        for op, arg, _pos in pickletools.genops(stream):
            if op.name == "GLOBAL":
                module, name = _py3_name(*str(arg).split(" ", 1))
                yield f"{module}.{name}", None
            elif op.name in ("STACK_GLOBAL", "INST", "OBJ"):
                target = str(arg).replace(" ", ".") if op.name == "INST" else (
                    ".".join(strings[-2:]) if op.name == "STACK_GLOBAL" and len(strings) >= 2 else "?")
                raise UnsafeCheckpointError(
                    f"refusing to load {where}: its pickle uses the {op.name} opcode (reaching "
                    f"{target!r}), which torch.save never writes; such a file is not a plain "
                    f"checkpoint and unpickling it could run code. Nothing was executed."
                )
            elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                strings.append(str(arg))
            elif op.name in ("LONG1", "LONG4", "INT", "LONG", "BININT", "BININT1", "BININT2"):
                last_int = arg
    except UnsafeCheckpointError:
        raise
    except Exception as err:  # pickletools raises ValueError on damaged/short streams
        raise CheckpointFormatError(
            f"{where} is damaged or truncated: its pickle cannot be parsed ({err}); {_RESTORE}."
        ) from err
    yield "", last_int


def _zip_data_pickle(path: Path) -> bytes:
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(names) != 1:
                raise CheckpointFormatError(
                    f"{path} is a zip file but not a torch checkpoint: expected one '<name>/data.pkl' "
                    f"record, found {names or 'none'}."
                )
            info = zf.getinfo(names[0])
            if info.file_size > _SCAN_LIMIT:
                raise CheckpointFormatError(
                    f"{path}: data.pkl is {info.file_size} bytes, more than a checkpoint's pickle "
                    f"ever needs ({_SCAN_LIMIT}); refusing to parse it."
                )
            return zf.read(names[0])
    except CheckpointFormatError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, RuntimeError, zlib.error,
            lzma.LZMAError) as err:  # a damaged directory or member header: a name that is not UTF-8
        # (UnicodeDecodeError), an unknown version, method or encryption flag (NotImplementedError, RuntimeError)
        raise CheckpointFormatError(f"{path} is a damaged zip checkpoint ({err}); {_RESTORE}.") from err


def _scan_file(path: Path) -> tuple[str, list[str]]:
    """(container, globals named by the file's pickles), without building any object."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    size = path.stat().st_size
    if size == 0:
        raise CheckpointFormatError(f"{path} is empty (0 bytes), not a torch checkpoint; {_RESTORE}.")
    if zipfile.is_zipfile(path):
        data = _zip_data_pickle(path)
        return "zip", [g for g, _ in _globals_in_pickle(io.BytesIO(data), str(path)) if g]
    if head.startswith(_ZIP_MAGIC):
        raise CheckpointFormatError(
            f"{path} is truncated ({size} bytes): it starts like a torch zip checkpoint but its zip "
            f"directory (at the end of the file) is missing; {_RESTORE}."
        )
    if not head.startswith(b"\x80"):
        raise CheckpointFormatError(
            f"{path} is not a torch checkpoint: it is neither a zip archive nor a pickle stream "
            f"(first bytes {head[:8]!r}). torch's old tar format is not supported."
        )
    # Legacy stream: magic number, protocol version, sys info, the object, then storage keys.
    found: list[str] = []
    with open(path, "rb") as fh:
        for part in ("magic number", "protocol version", "system info", "object", "storage keys"):
            values = list(_globals_in_pickle(fh, f"{path} ({part})"))
            found += [g for g, _ in values if g]
            if part == "magic number" and values[-1][1] != _LEGACY_MAGIC:
                raise CheckpointFormatError(
                    f"{path} is a pickle but not a torch checkpoint (no torch magic number at the "
                    f"start); headgeom reads only files written by torch.save."
                )
    return "legacy", found


def scan_globals(path: str | os.PathLike[str]) -> tuple[str, tuple[str, ...]]:
    """(container, sorted distinct globals) of a checkpoint file, parsing opcodes only."""
    container, found = _scan_file(Path(path))
    return container, tuple(sorted(set(found)))


def _allow(path: Path, names: tuple[str, ...]) -> list[tuple[Callable[..., Any] | type, str]]:
    """The (object, path) pairs to hand to torch's ``safe_globals``; raises on a refused name."""
    extra: list[tuple[Any, str]] = []
    for full in names:
        if full in _TORCH_NAMES:
            continue
        if full in _NUMPY:
            extra.append((_NUMPY[full], full))
            if full == "numpy.dtype":  # torch's BUILD checks the instance's type, e.g. Float32DType
                extra += [(obj, key) for key, obj in _NUMPY.items() if key.startswith("numpy.dtypes.")]
            continue
        stand_in = _stand_in(full)
        if stand_in is None:
            raise _refusal(full, str(path))
        extra.append((stand_in, full))
    return extra


def _torch_refusal(err: Exception) -> str:
    """The reason in torch's weights-only refusal, on one line (torch wraps it in a paragraph of advice)."""
    text = str(err)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1].split("Check the documentation of torch.load", 1)[0]
    return " ".join(text.split()) or type(err).__name__


def missing_checkpoint(path: str | os.PathLike[str]) -> FileNotFoundError:
    """The error for a checkpoint that is not there (one wording for every command)."""
    return FileNotFoundError(missing_checkpoint_message(path))


def safe_load(path: str | os.PathLike[str]) -> LoadedFile:
    """Load a torch checkpoint on the CPU without executing pickled code.

    Raises:
        FileNotFoundError: no such file.
        UnsafeCheckpointError: the pickle names a global outside the allow-list (nothing ran).
        CheckpointFormatError: truncated, damaged or not a torch checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise missing_checkpoint(path)
    container, names = scan_globals(path)
    extra = _allow(path, names)
    try:
        with torch.serialization.safe_globals(extra), warnings.catch_warnings():
            # a damaged file can claim another pickle protocol: torch warns, then loads it or fails (one line below)
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:  # torch's own unpickler refused something the scan let by
        raise UnsafeCheckpointError(f"refusing to load {path}: torch's restricted unpickler said: "
                                    f"{_torch_refusal(err)}; nothing was executed") from err
    except (RuntimeError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, AssertionError,
            zipfile.BadZipFile, OSError) as err:  # a damaged pickle: an allowed global called with wrong
        # arguments (TypeError), a short stack or memo (IndexError, KeyError), a bad BUILD (AttributeError),
        # a legacy stream whose storage keys do not match (torch asserts)
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise CheckpointFormatError(
            f"{path} could not be read as a torch checkpoint ({type(err).__name__}: {first}); it may be "
            f"truncated or damaged; {_RESTORE}."
        ) from err
    stand_ins = tuple(full for _, full in extra if full not in _NUMPY)
    return LoadedFile(obj=obj, path=path, sha256=file_sha256(path), size_bytes=path.stat().st_size,
                      container=container, global_names=names, stand_ins=stand_ins)
