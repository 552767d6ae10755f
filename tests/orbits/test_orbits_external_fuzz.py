"""Property-based fuzzing of the orbit ``.npz`` files ``headgeom analyze FILE.npz`` reads
(headgeom.orbits.external) with hypothesis.

The property, for any archive a user may hand over: :func:`load_orbit_npz` returns the embeddings
(and the analysis of them runs), or raises :class:`NpzFormatError` whose message is one line; never
another exception, and a pickled object array is never unpickled (its payload would leave a marker
file). Archives are drawn from headgeom's layout with one thing wrong or not (every name, rank,
shape, dtype, NaN/inf, empty arrays, object arrays, missing and extra keys) and as damaged bytes
of a valid archive (truncations, flipped and inserted bytes). A last target runs the command line
on a few: exit 0, or exit 2 with one line on stderr, and nothing written but the output folder.
Budgets and settings: tests/fuzz_inputs.py.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_inputs import RunsCode, budget, damaged, listing, one_line
from headgeom.cli import main
from headgeom.orbits.external import ExternalOrbits, NpzFormatError, analyze_external, load_orbit_npz

pytestmark = pytest.mark.usefixtures("one_thread")

DTYPES = ["float32", "float64", "float16", "int64", "int8", "uint8", "bool", "complex64", "<U2", "datetime64[s]"]
NAMES = st.sampled_from(["z", "h", "h1", "h2", "labels", "xi"]) | st.text(
    alphabet="abcxyz_019.-/ ", min_size=1, max_size=6)


def _fill(shape: tuple[int, ...], dtype: str, special: str, rng: np.random.Generator) -> np.ndarray:
    a = np.asarray(rng.normal(size=shape) * 3)
    if special in ("nan", "inf", "-inf") and a.size:
        a.flat[rng.integers(a.size)] = float(special)
    elif special == "zeros":
        a[...] = 0.0
    elif special == "huge":
        a *= 1e300
    if dtype.startswith(("float", "complex")):
        with np.errstate(over="ignore"):
            return a.astype(dtype)
    if dtype in ("<U2", "datetime64[s]"):
        return np.full(shape, "ab" if dtype == "<U2" else np.datetime64(0, "s"), dtype=dtype)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(a, posinf=0, neginf=0).astype(dtype)


@st.composite
def arrays(draw) -> dict[str, np.ndarray]:
    """headgeom's layout (z, head points, maybe labels and xi), then 0-2 edits of it."""
    n, k, dz, dh = (draw(st.integers(2, 5) | st.integers(0, 5)) for _ in range(4))  # mostly valid sizes
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    out = {"z": rng.normal(size=(n, k, dz)).astype(np.float32)}
    for name in draw(st.lists(st.sampled_from(["h", "h1", "h2"]), unique=True, min_size=1, max_size=2)):
        out[name] = np.tanh(rng.normal(size=(n, k, dh)))
    if draw(st.booleans()):
        out["labels"] = np.arange(n) % draw(st.integers(2, 3) | st.just(1))
    if draw(st.booleans()):
        out["xi"] = np.linspace(0.0, 90.0, k)
    for _ in range(draw(st.integers(0, 2))):
        name = draw(NAMES)
        edit = draw(st.sampled_from(["drop", "replace", "object"]))
        if edit == "drop":
            out.pop(name, None)
        elif edit == "object":
            out[name] = np.array([{"a": 1}, None], dtype=object)
        else:
            shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
            out[name] = _fill(shape, draw(st.sampled_from(DTYPES)),
                              draw(st.sampled_from(["", "nan", "inf", "-inf", "zeros", "huge"])), rng)
    return out


def _save(folder: Path, data: dict[str, np.ndarray]) -> Path:
    path = folder / "orbits.npz"
    np.savez(path, **{k.replace("/", "_"): v for k, v in data.items()})
    return path


def _check(path: Path) -> ExternalOrbits | None:
    try:
        ext = load_orbit_npz(path)
    except NpzFormatError as err:
        event("refused")
        one_line(str(err))
        assert str(path) in str(err), str(err)  # it names the file
        return None
    event("loaded")
    assert list(ext.features)[0] == "z" and ext.heads
    n, k, _ = ext.features["z"].shape
    assert n >= 2 and k >= 2 and all(f.shape[:2] == (n, k) for f in ext.features.values())
    return ext


@budget(60)
@given(arrays())
def test_any_layout_loads_or_fails_in_one_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        ext = _check(_save(Path(tmp), data))
        if ext is not None:  # what was accepted can be analysed
            result, figures = analyze_external(ext, n_boot=8)
            assert set(result["families"]["external"]["ratios"]) == set(ext.heads) and figures


def _good_archive() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        path = _save(Path(tmp), {"z": rng.normal(size=(4, 3, 5)).astype(np.float32),
                                 "h": rng.normal(size=(4, 3, 2)), "labels": np.arange(4) % 2,
                                 "xi": np.arange(3.0)})
        return path.read_bytes()


GOOD = _good_archive()


@budget(80)
@given(damaged(GOOD))
def test_a_damaged_archive_loads_or_fails_in_one_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "orbits.npz"
        path.write_bytes(data)
        _check(path)


@budget(10)
@given(st.sampled_from(["z", "h", "labels", "xi", "extra"]), st.booleans())
def test_a_pickled_object_array_is_refused_and_never_unpickled(name, in_list):
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "code-ran"
        payload = RunsCode(marker)
        rng = np.random.default_rng(1)
        data = {"z": rng.normal(size=(3, 2, 4)), "h": rng.normal(size=(3, 2, 2))}
        data[name] = np.array([[payload]] if in_list else payload, dtype=object)
        path = _save(Path(tmp), data)
        with pytest.raises(NpzFormatError) as err:
            load_orbit_npz(path)
        assert "object array" in one_line(str(err.value))
        assert not marker.exists()


@budget(10)
@given(st.one_of(arrays(), damaged(GOOD)))
def test_the_command_exits_0_or_2_with_one_line_and_writes_only_its_output(data):
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp)
        if isinstance(data, bytes):
            (sandbox / "orbits.npz").write_bytes(data)
        else:
            _save(sandbox, data)
        before = listing(sandbox)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(sandbox):
            code = main(["analyze", "orbits.npz", "--boot", "8", "--out", "out"])
        after = listing(sandbox)
        assert code in (0, 2), (code, err.getvalue())
        if code == 2:
            assert one_line(err.getvalue()).startswith("headgeom analyze: error: ")
            assert after == before  # nothing written, not even the output folder
        else:
            assert {k: v for k, v in after.items() if not k.startswith("out/")} == before
            assert "out/analysis.json" in after


# ---- regressions the fuzzing found: zipfile's other errors on a damaged member

def _central_field(data: bytes, offset: int, value: int) -> bytes:
    """``data`` with the 2-byte field at ``offset`` of its first central-directory entry set to ``value``."""
    at = data.index(b"PK\x01\x02") + offset
    return data[:at] + value.to_bytes(2, "little") + data[at + 2:]


def _deflate_junk(data: bytes) -> bytes:
    """The first member marked deflated (method 8) and its data starting with a reserved deflate block type."""
    data = _central_field(data, 10, 8)
    head = data.index(b"PK\x03\x04")
    start = head + 30 + int.from_bytes(data[head + 26:head + 28], "little") + int.from_bytes(data[head + 28:head + 30],
                                                                                             "little")
    return data[:start] + b"\x07" + data[start + 1:]  # BFINAL=1, BTYPE=11 (reserved)


@pytest.mark.parametrize("damage, raised", [
    (lambda d: _central_field(d, 8, 0x1), "encrypted"),  # the encryption flag: zipfile raises RuntimeError
    (lambda d: _central_field(d, 10, 99), "compression method"),  # an unknown method: NotImplementedError
    (_deflate_junk, "invalid block type"),  # zlib.error
])
def test_a_damaged_member_header_is_one_npz_format_error(tmp_path, damage, raised):
    path = tmp_path / "orbits.npz"
    path.write_bytes(damage(GOOD))
    with pytest.raises(NpzFormatError, match="cannot be read") as err:
        load_orbit_npz(path)
    assert raised in one_line(str(err.value)) and str(path) in str(err.value)


def test_a_member_header_that_numpy_cannot_tokenize_is_one_npz_format_error(tmp_path):
    import zipfile

    path = tmp_path / "orbits.npz"
    with zipfile.ZipFile(path, "w") as zf:  # numpy retries a header that is not a literal through tokenize
        zf.writestr("z.npy", b"\x93NUMPY\x01\x00\x0a\x00{'descr'\x00\n")
    with pytest.raises(NpzFormatError, match="cannot be read") as err:
        load_orbit_npz(path)
    assert "EOF in multi-line" in one_line(str(err.value))
