"""Property-based fuzzing of the authors' released result files (headgeom.released.read_file and the
parse_* readers behind it) with hypothesis.

The property, for any content of any pinned file: its typed record is read, or
:class:`ReleasedFileError` (a ValueError) is raised with a one-line message naming the file; never
another exception, and no pickled code runs (a payload would leave a marker file). The files are
damaged copies (truncations, flipped, overwritten, deleted, repeated and inserted bytes) of the
synthetic copy of tests/released_copy.py, file for file in the authors' formats (pickled dicts in
.npy, .npz archives, the log text), pinned into the test's own manifest so that the damage gets
past the sha256 check and reaches the readers; and pickles calling any other global, in the .npy
container the authors' dict files use. Budgets and settings: tests/fuzz_inputs.py.
"""
from __future__ import annotations

import functools
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_inputs import budget, damaged, one_line
from headgeom.released import MANIFEST, ReleasedFileError, read_file
from headgeom.released.files import read_npy_dict
from released_copy import manifest_of, write_copy

PATHS = sorted(entry.path for entry in MANIFEST.files)
NPY_DICTS = [p for p in PATHS if p.endswith(".npy")]


@functools.cache
def originals() -> dict[str, bytes]:
    """Every pinned file of the synthetic copy, as written."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = write_copy(Path(tmp) / "copy")
        return {p: copy.file(p).read_bytes() for p in PATHS}


def _read(path: str, content: bytes, marker: Path | None = None) -> None:
    """Pin ``content`` as the file ``path`` of a copy and read it: a record or one error line."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "copy"
        file = root / path
        file.parent.mkdir(parents=True)
        file.write_bytes(content)
        try:
            record = read_file(root, path, manifest_of(root))
        except ReleasedFileError as err:
            event("refused")
            assert str(file) in one_line(str(err)), str(err)  # it names the file
        else:
            event("read")
            assert record is not None
        assert marker is None or not marker.exists()


@st.composite
def damaged_file(draw) -> tuple[str, bytes]:
    path = draw(st.sampled_from(PATHS), label="path")
    return path, draw(damaged(originals()[path]), label="content")


@budget(100)
@given(damaged_file())
def test_a_damaged_released_file_reads_or_fails_in_one_line(case):
    _read(*case)


GLOBALS = st.one_of(
    st.sampled_from(["posix system", "os system", "builtins eval", "builtins exec", "__builtin__ eval",
                     "subprocess Popen", "builtins getattr", "importlib import_module", "numpy load",
                     "pickle loads", "builtins dict", "builtins bytearray", "builtins set", "_codecs encode",
                     "numpy.core.multiarray _reconstruct", "numpy dtype", "numpy ndarray"]),
    st.builds(lambda m, n: f"{m} {n}", st.text("abcdefghijklmnopqrstuvwxyz_.", min_size=1, max_size=12),
              st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)))


def _npy_dict_calling(global_: str, marker: Path, protocol_byte: int) -> bytes:
    """What numpy.save writes for a dict, the dict holding GLOBAL("touch MARKER") (a hostile file)."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "|O", "fortran_order": False, "shape": ()})
    arg = f"touch {marker}".encode()
    body = (b"\x80" + bytes([protocol_byte]) + b"}q\x00X\x03\x00\x00\x00accq\x01c"
            + global_.replace(" ", "\n", 1).encode() + b"\nq\x02X" + len(arg).to_bytes(4, "little") + arg
            + b"\x85q\x03Rq\x04s.")
    return head.getvalue() + body


@budget(25)
@given(st.sampled_from(NPY_DICTS), GLOBALS, st.sampled_from([2, 3, 4]))
def test_a_pickle_calling_any_global_runs_nothing(path, global_, protocol_byte):
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "code-ran"
        _read(path, _npy_dict_calling(global_, marker, protocol_byte), marker)


def test_the_hostile_npy_would_run_under_numpys_own_loader(tmp_path):
    """So the refusals above are refusals of a working payload."""
    marker = tmp_path / "code-ran"
    path = tmp_path / "evil.npy"
    path.write_bytes(_npy_dict_calling("posix system", marker, 2))
    assert np.load(path, allow_pickle=True) == {"acc": 0} and marker.exists()
    marker.unlink()
    with pytest.raises(ReleasedFileError, match="posix.system"):
        read_npy_dict(path)
    assert not marker.exists()


# ---- regressions the fuzzing found in the readers

def _npy_header() -> bytes:
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "|O", "fortran_order": False, "shape": ()})
    return head.getvalue()


def _central_field(data: bytes, offset: int, value: int) -> bytes:
    at = data.index(b"PK\x01\x02") + offset
    return data[:at] + value.to_bytes(2, "little") + data[at + 2:]


GUILLOTINE = "results/cifar10/resnet18/guillotine_results.npy"
HESSIAN = "results/cifar10/resnet18/hessian_tracker/raw_data_normal_swish.npz"


@pytest.mark.parametrize("path, content, said", [
    (GUILLOTINE, lambda: b"\x93NUMPY\x01\x00\x0a\x00{'descr'\x00\n", "EOF in multi-line"),  # numpy's header
    # parser, retrying a header that is not a literal through tokenize: tokenize.TokenError
    (GUILLOTINE, lambda: _npy_header() + b"\x80\x04\x95" + b"\xff" * 8, "frame size"),  # a FRAME length past sys.maxsize
    (HESSIAN, lambda: _central_field(originals()[HESSIAN], 8, 0x1), "encrypted"),  # zipfile's RuntimeError
])
def test_a_damaged_header_is_one_released_file_error(tmp_path, path, content, said):
    file = tmp_path / "copy" / path
    file.parent.mkdir(parents=True)
    file.write_bytes(content())
    with pytest.raises(ReleasedFileError) as err:
        read_file(tmp_path / "copy", path, manifest_of(tmp_path / "copy"))
    assert said in one_line(str(err.value)) and str(file) in str(err.value)


def test_an_unpickler_message_of_two_lines_is_one_line(tmp_path):
    path = tmp_path / "copy" / GUILLOTINE
    path.parent.mkdir(parents=True)
    path.write_bytes(_npy_header() + b"\x80\x02X\x01\x00\x00\x00aQ.")  # a persistent id: the C unpickler says
    with pytest.raises(ReleasedFileError, match="persistent id") as err:  # so in two lines
        read_file(tmp_path / "copy", GUILLOTINE, manifest_of(tmp_path / "copy"))
    one_line(str(err.value))
