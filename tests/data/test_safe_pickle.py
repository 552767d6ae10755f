"""The plain-data unpickler: numpy dtype states are checked before numpy applies them."""
import io
import pickle
import subprocess
import sys

import numpy as np
import pytest

from headgeom.data.safe_pickle import safe_pickle_load

# Found by fuzzing the released reader: one byte of an object dtype's pickled state (its flags,
# 63 = "items are object pointers, refcounted") changed to 18 made numpy read the array's data as
# pointers and crash the interpreter. The C unpickler applied it; ours must refuse it. The damaged
# pickle is written by a pickler that gives dtypes another state (reducer_override), and loaded in a
# child process, so that a regression crashes the child, not the test run.
CRASHING_LOAD = """
import io, pickle
import numpy as np
from headgeom.data.safe_pickle import safe_pickle_load

class DamagedDtypes(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, np.dtype):
            constructor, args, state = obj.__reduce__()
            return constructor, args, state[:-1] + (FLAGS,)
        return NotImplemented

out = io.BytesIO()
DamagedDtypes(out, protocol=PROTOCOL).dump(np.array({"acc": 0.5}, dtype=object))
try:
    safe_pickle_load(out.getvalue())
except pickle.UnpicklingError as err:
    print("refused:", err)
"""


def damaged_load(protocol: int, flags: int) -> subprocess.CompletedProcess:
    code = CRASHING_LOAD.replace("PROTOCOL", str(protocol)).replace("FLAGS", str(flags))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_a_damaged_object_dtype_state_is_refused_not_a_crash(protocol):
    done = damaged_load(protocol, flags=18)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: damaged numpy dtype state" in done.stdout and "item 7 is 18, numpy writes 63" in done.stdout


def test_the_same_pickler_with_numpys_own_flags_loads():  # the pickler above is not what is refused
    done = damaged_load(4, flags=63)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["<f8", ">f8", ">i4", "<c16", "u1", "?", "U5", "S7", "O"])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_arrays_load_as_pythons_own_unpickler_loads_them(dtype, protocol):
    values = np.array([{"a": 1}, [2.0]], dtype=object) if dtype == "O" else np.arange(6).reshape(2, 3).astype(dtype)
    payload = pickle.dumps({"x": values, "y": [values[:1]]}, protocol=protocol)
    out, reference = safe_pickle_load(payload), pickle.loads(payload)
    for got, want in ((out["x"], reference["x"]), (out["y"][0], reference["y"][0])):
        assert got.dtype == want.dtype and got.shape == want.shape and got.tolist() == want.tolist()
    assert out["x"].tolist() == values.tolist()


class StatePickler(pickle.Pickler):
    """Writes every dtype with its state's item ``at`` set to ``value``."""

    def __init__(self, file, at: int, value, **kwargs):
        super().__init__(file, **kwargs)
        self.at, self.value = at, value

    def reducer_override(self, obj):
        if isinstance(obj, np.dtype):
            constructor, args, state = obj.__reduce__()
            return constructor, args, state[:self.at] + (self.value,) + state[self.at + 1:]
        return NotImplemented


def with_dtype_state(obj, at: int, value, protocol: int = 2) -> bytes:
    out = io.BytesIO()
    StatePickler(out, at, value, protocol=protocol).dump(obj)
    return out.getvalue()


def test_a_state_numpy_never_writes_for_that_dtype_is_refused():
    with pytest.raises(pickle.UnpicklingError, match=r"damaged numpy dtype state .*item 5 is 4, numpy writes -1"):
        safe_pickle_load(with_dtype_state(np.arange(3.0), at=5, value=4))
    with pytest.raises(pickle.UnpicklingError, match=r"item 1 is '\|', numpy writes '<'"):
        safe_pickle_load(with_dtype_state(np.arange(3.0), at=1, value="|"))  # byte order only among < and >


def test_structured_dtypes_are_not_plain_data():
    with pytest.raises(pickle.UnpicklingError, match="damaged numpy dtype state"):
        safe_pickle_load(pickle.dumps(np.zeros(2, dtype=[("a", "<f4")]), protocol=4))


def test_a_huge_length_field_reads_as_truncated_without_allocating_it():
    # BINBYTES8 claiming 2**62 bytes: the pure-Python reader reads what is there and says so
    damaged = b"\x80\x04\x8e" + (2**62).to_bytes(8, "little") + b"abc."
    with pytest.raises((pickle.UnpicklingError, EOFError)):
        safe_pickle_load(damaged)


class DtypeArgsPickler(pickle.Pickler):
    """Writes every dtype as ``numpy.dtype(spelling, False, True)``."""

    def __init__(self, file, spelling: str, **kwargs):
        super().__init__(file, **kwargs)
        self.spelling = spelling

    def reducer_override(self, obj):
        if isinstance(obj, np.dtype):
            return np.dtype, (self.spelling, False, True)
        return NotImplemented


@pytest.mark.parametrize("spelling, raised", [("08f8", "SyntaxError"), ("q9z", "TypeError")])
def test_whatever_numpy_raises_on_damaged_arguments_is_one_unpickling_error(spelling, raised):
    out = io.BytesIO()  # "08f8": numpy's dtype-string parser raises SyntaxError (found by fuzzing)
    DtypeArgsPickler(out, spelling, protocol=4).dump(np.arange(2.0))
    with pytest.raises(pickle.UnpicklingError, match=f"dtype refused its pickled arguments \\({raised}"):
        safe_pickle_load(out.getvalue())
