"""headgeom's one unpickler for pickles of plain data: dicts, lists and numpy arrays.

Read this way: CIFAR's python batches (:mod:`headgeom.data.cifar`) and the authors' released
result files (:mod:`headgeom.released.files`), files a user did not write and should not trust.

:class:`SafeUnpickler` resolves only numpy array/dtype reconstruction and builtin containers; any
other global (``os.system``, ``builtins.eval``, a class) raises :class:`UnsafePickleError` before
anything is called. It is Python's pure-Python unpickler (``pickle._Unpickler``), not the C one,
and it checks each numpy dtype's pickled state before numpy applies it: numpy trusts a dtype's
state (its flags say whether items are object pointers), and a damaged state on an object dtype
made numpy read array bytes as pointers and crash the interpreter (found by fuzzing the released
reader). A state that is not the one numpy writes for that dtype (byte order aside) is refused
as damaged; plain-number files never hold any other. The pure-Python reader also never allocates
what a damaged length field claims: it reads what the file holds and reports it truncated.
"""
from __future__ import annotations

import _codecs
import importlib
import io
import pickle
from contextlib import contextmanager
from typing import Any, BinaryIO, Iterator

import numpy as np

__all__ = ["SafeUnpickler", "UnsafePickleError", "safe_pickle_load"]


class UnsafePickleError(pickle.UnpicklingError, ValueError):
    """A pickle asked for a global outside the allow-list (it was not executed)."""


def _numpy_attr(name: str, *modules: str) -> Any:
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"numpy provides none of {[m + '.' + name for m in modules]}")


def _allowed_globals() -> dict[tuple[str, str], Any]:
    reconstruct = _numpy_attr("_reconstruct", "numpy._core.multiarray", "numpy.core.multiarray")
    scalar = _numpy_attr("scalar", "numpy._core.multiarray", "numpy.core.multiarray")
    frombuffer = _numpy_attr("_frombuffer", "numpy._core.numeric", "numpy.core.numeric")
    allowed: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _codecs.encode,  # protocol-2 pickles spell bytes this way
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(module, "_reconstruct")] = reconstruct
        allowed[(module, "scalar")] = scalar
    for module in ("numpy.core.numeric", "numpy._core.numeric"):
        allowed[(module, "_frombuffer")] = frombuffer  # protocol-5 arrays
    for module in ("builtins", "__builtin__"):
        for name, obj in (("dict", dict), ("list", list), ("tuple", tuple), ("set", set),
                          ("frozenset", frozenset), ("bytearray", bytearray)):
            allowed[(module, name)] = obj
    return allowed


_BYTE_ORDERS = ("<", ">")


def check_dtype_state(dtype: np.dtype, state: Any) -> None:
    """Raise ``pickle.UnpicklingError`` unless ``state`` is the state numpy pickles for ``dtype``
    (the fresh dtype the pickle built), up to the byte order of a multi-byte type."""
    expected = dtype.__reduce__()[2]
    if not isinstance(state, tuple) or len(state) != len(expected):
        raise pickle.UnpicklingError(f"damaged numpy dtype state {state!r:.80} for {dtype}")
    order_free = expected[1] in _BYTE_ORDERS and state[1] in _BYTE_ORDERS
    for i, (got, want) in enumerate(zip(state, expected)):
        if i == 1 and order_free:
            continue
        if type(got) is not type(want) or got != want:
            raise pickle.UnpicklingError(f"damaged numpy dtype state {state!r:.80} for {dtype} "
                                         f"(item {i} is {got!r:.40}, numpy writes {want!r:.40})")


class SafeUnpickler(pickle._Unpickler):
    """The pure-Python unpickler with an allow-list of globals and checked dtype states."""

    _allowed: dict[tuple[str, str], Any] | None = None
    dispatch = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        if SafeUnpickler._allowed is None:
            SafeUnpickler._allowed = _allowed_globals()
        try:
            return SafeUnpickler._allowed[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing to load the global {module}.{name}: the files read this way (CIFAR "
                f"batches, the authors' released results) hold only dicts, lists and numpy "
                f"arrays, so this one is not such a file, and loading it could run code; "
                f"nothing was executed"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a persistent id: plain-data pickles hold none")

    def load_build(self) -> None:
        if len(self.stack) < 2:
            raise pickle.UnpicklingError("BUILD with nothing to build (the pickle is damaged)")
        state, inst = self.stack[-1], self.stack[-2]
        if isinstance(inst, np.dtype):
            check_dtype_state(inst, state)
        with _refused_by(f"{type(inst).__name__}.__setstate__"):
            super().load_build()

    def load_reduce(self) -> None:
        if len(self.stack) < 2:
            raise pickle.UnpicklingError("REDUCE with nothing to call (the pickle is damaged)")
        with _refused_by(getattr(self.stack[-2], "__name__", "a constructor")):
            super().load_reduce()

    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.REDUCE[0]] = load_reduce


@contextmanager
def _refused_by(what: str) -> Iterator[None]:
    """Whatever numpy or a container raises on damaged arguments (ValueError, TypeError, even
    SyntaxError from numpy's dtype-string parser) as one UnpicklingError naming the call."""
    try:
        yield
    except pickle.UnpicklingError:
        raise
    except Exception as err:
        said = " ".join(str(err).split())
        raise pickle.UnpicklingError(f"{what} refused its pickled arguments ({type(err).__name__}: "
                                     f"{said:.200})") from err


def safe_pickle_load(file: BinaryIO | bytes) -> Any:
    """Unpickle with :class:`SafeUnpickler`; py2 strings decode as latin-1, as numpy advises."""
    if isinstance(file, (bytes, bytearray)):
        file = io.BytesIO(file)
    return SafeUnpickler(file, encoding="latin1").load()
