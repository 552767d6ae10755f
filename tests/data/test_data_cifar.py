"""CIFAR loaders against tiny synthetic files in both official layouts.

The writers here build every record byte by byte from a pixel formula (R plane, G plane,
B plane, row-major), independently of the loader's reshape, and the expected (N, 3, H, W)
array is built from the same formula by index, so a wrong channel or row order fails.
"""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from headgeom.data import (UnsafePickleError, find_cifar, load_cifar10, load_cifar100,
                           read_cifar_binary, resolve_data_dir, safe_pickle_load)

C10_NAMES = [f"c10_{i}" for i in range(10)]
FINE_NAMES = [f"fine_{i}" for i in range(100)]
COARSE_NAMES = [f"coarse_{i}" for i in range(20)]


def pixel(i: int, c: int, h: int, w: int) -> int:
    """The value of image i, channel c, row h, column w in every synthetic file."""
    return (31 * i + 80 * c + 7 * h + 3 * w + h * w) % 256


def image_bytes(i: int) -> bytes:
    return bytes(pixel(i, c, h, w) for c in range(3) for h in range(32) for w in range(32))


def expected_images(ids: list[int]) -> torch.Tensor:
    out = np.empty((len(ids), 3, 32, 32), dtype=np.uint8)
    for n, i in enumerate(ids):
        for c in range(3):
            for h in range(32):
                for w in range(32):
                    out[n, c, h, w] = pixel(i, c, h, w)
    return torch.from_numpy(out)


# image ids (used in the pixel formula) per file; 2 images per CIFAR-10 batch keeps it tiny
C10_TRAIN = {f"data_batch_{b}": [2 * b, 2 * b + 1] for b in range(1, 6)}
C10_TEST = [100, 101, 102]
C100_TRAIN, C100_TEST = [3, 4, 5, 6], [7, 8]


def c10_label(i: int) -> int:
    return (i * 3) % 10


def fine_label(i: int) -> int:
    return (i * 37 + 11) % 100


def coarse_label(i: int) -> int:
    return (i * 7 + 2) % 20


def write_c10_binary(root: Path) -> Path:
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    for name, ids in list(C10_TRAIN.items()) + [("test_batch", C10_TEST)]:
        (folder / f"{name}.bin").write_bytes(b"".join(bytes([c10_label(i)]) + image_bytes(i)
                                                      for i in ids))
    (folder / "batches.meta.txt").write_text("\n".join(C10_NAMES) + "\n\n")
    return folder


def write_c100_binary(root: Path) -> Path:
    folder = root / "cifar-100-binary"
    folder.mkdir(parents=True)
    for name, ids in (("train", C100_TRAIN), ("test", C100_TEST)):
        (folder / f"{name}.bin").write_bytes(b"".join(
            bytes([coarse_label(i), fine_label(i)]) + image_bytes(i) for i in ids))
    (folder / "fine_label_names.txt").write_text("\n".join(FINE_NAMES) + "\n")
    (folder / "coarse_label_names.txt").write_text("\n".join(COARSE_NAMES) + "\n")
    return folder


def batch_array(ids: list[int]) -> np.ndarray:
    return np.frombuffer(b"".join(image_bytes(i) for i in ids), dtype=np.uint8).reshape(
        len(ids), 3072).copy()


def write_pickle(path: Path, obj: dict, key_type: type, protocol: int) -> None:
    conv = (lambda k: k.encode()) if key_type is bytes else (lambda k: k)
    path.write_bytes(pickle.dumps({conv(k): v for k, v in obj.items()}, protocol=protocol))


def write_c10_python(root: Path, key_type: type = bytes, protocol: int = 2) -> Path:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name, ids in list(C10_TRAIN.items()) + [("test_batch", C10_TEST)]:
        write_pickle(folder / name, {"batch_label": name, "labels": [c10_label(i) for i in ids],
                                     "data": batch_array(ids),
                                     "filenames": [f"{i}.png" for i in ids]}, key_type, protocol)
    names = [n.encode() for n in C10_NAMES] if key_type is bytes else C10_NAMES
    write_pickle(folder / "batches.meta", {"label_names": names, "num_vis": 3072},
                 key_type, protocol)
    return folder


def write_c100_python(root: Path, key_type: type = bytes, protocol: int = 2) -> Path:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    for name, ids in (("train", C100_TRAIN), ("test", C100_TEST)):
        write_pickle(folder / name, {"fine_labels": [fine_label(i) for i in ids],
                                     "coarse_labels": [coarse_label(i) for i in ids],
                                     "data": batch_array(ids)}, key_type, protocol)
    write_pickle(folder / "meta", {"fine_label_names": FINE_NAMES,
                                   "coarse_label_names": COARSE_NAMES}, key_type, protocol)
    return folder


# ----------------------------------------------------------------- a Python-2 style pickle
def _py2_str(s: bytes) -> bytes:
    return (b"U" + bytes([len(s)]) + s) if len(s) < 256 else (b"T" + struct.pack("<I", len(s)) + s)


def _py2(obj) -> bytes:
    """Opcodes as cPickle protocol 2 wrote the official files: py2 ``str`` is BINSTRING,
    arrays are numpy.core.multiarray._reconstruct + BUILD with the raw bytes as a str."""
    if isinstance(obj, bool):
        return b"\x88" if obj else b"\x89"
    if isinstance(obj, int):
        return b"J" + struct.pack("<i", obj)
    if isinstance(obj, (str, bytes)):
        return _py2_str(obj.encode() if isinstance(obj, str) else obj)
    if obj is None:
        return b"N"
    if isinstance(obj, list):
        return b"](" + b"".join(_py2(x) for x in obj) + b"e"
    if isinstance(obj, tuple):
        return b"(" + b"".join(_py2(x) for x in obj) + b"t"
    if isinstance(obj, dict):
        return b"}(" + b"".join(_py2(k) + _py2(v) for k, v in obj.items()) + b"u"
    if isinstance(obj, np.ndarray):
        assert obj.dtype == np.uint8
        dtype = (b"cnumpy\ndtype\n" + _py2(("u1", 0, 1)) + b"R"
                 + _py2((3, "|", None, None, None, -1, -1, 0)) + b"b")
        return (b"cnumpy.core.multiarray\n_reconstruct\n" + b"(cnumpy\nndarray\n"
                + _py2((0,)) + _py2("b") + b"tR"
                + b"(" + _py2(1) + _py2(tuple(obj.shape)) + dtype + b"\x89"
                + _py2(obj.tobytes()) + b"tb")
    raise TypeError(type(obj))


def py2_pickle(obj) -> bytes:
    return b"\x80\x02" + _py2(obj) + b"."


def write_c10_py2(root: Path) -> Path:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name, ids in list(C10_TRAIN.items()) + [("test_batch", C10_TEST)]:
        (folder / name).write_bytes(py2_pickle({"batch_label": name,
                                                "labels": [c10_label(i) for i in ids],
                                                "data": batch_array(ids)}))
    (folder / "batches.meta").write_bytes(py2_pickle({"label_names": C10_NAMES,
                                                      "num_cases_per_batch": 10000}))
    return folder


# ----------------------------------------------------------------- loading
def check_c10(root: Path) -> None:
    train = load_cifar10(root, "train")
    ids = [i for batch in C10_TRAIN.values() for i in batch]
    assert train.images.dtype == torch.uint8 and train.images.shape == (10, 3, 32, 32)
    assert torch.equal(train.images, expected_images(ids))
    assert train.labels.dtype == torch.int64
    assert train.labels.tolist() == [c10_label(i) for i in ids]
    assert train.classes == C10_NAMES and train.name == "cifar10" and train.split == "train"
    test = load_cifar10(root, "test")
    assert torch.equal(test.images, expected_images(C10_TEST))
    assert test.labels.tolist() == [c10_label(i) for i in C10_TEST]


def check_c100(root: Path) -> None:
    for split, ids in (("train", C100_TRAIN), ("test", C100_TEST)):
        fine = load_cifar100(root, split)
        assert torch.equal(fine.images, expected_images(ids))
        assert fine.labels.tolist() == [fine_label(i) for i in ids]
        assert fine.classes == FINE_NAMES
        coarse = load_cifar100(root, split, label_type="coarse")
        assert torch.equal(coarse.images, expected_images(ids))
        assert coarse.labels.tolist() == [coarse_label(i) for i in ids]
        assert coarse.classes == COARSE_NAMES


def test_cifar10_binary_exact_pixels_and_labels(tmp_path):
    write_c10_binary(tmp_path)
    assert find_cifar("cifar10", tmp_path) == (tmp_path / "cifar-10-batches-bin", "binary")
    check_c10(tmp_path)


@pytest.mark.parametrize("key_type", [bytes, str])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar10_python_exact_pixels_and_labels(tmp_path, key_type, protocol):
    write_c10_python(tmp_path, key_type, protocol)
    assert find_cifar("cifar10", tmp_path)[1] == "python"
    check_c10(tmp_path)


def test_cifar10_python2_style_pickle(tmp_path):
    """The official files were written by Python 2: py2 str payloads decode as latin-1."""
    write_c10_py2(tmp_path)
    check_c10(tmp_path)


def test_cifar100_binary_fine_and_coarse(tmp_path):
    write_c100_binary(tmp_path)
    check_c100(tmp_path)


@pytest.mark.parametrize("key_type", [bytes, str])
def test_cifar100_python_fine_and_coarse(tmp_path, key_type):
    write_c100_python(tmp_path, key_type)
    check_c100(tmp_path)


def test_root_may_be_the_extracted_folder(tmp_path):
    folder = write_c10_binary(tmp_path)
    assert find_cifar("cifar10", folder) == (folder, "binary")
    assert torch.equal(load_cifar10(folder, "test").images, expected_images(C10_TEST))


def test_binary_preferred_when_both_layouts_present(tmp_path):
    write_c10_python(tmp_path)
    write_c10_binary(tmp_path)
    assert find_cifar("cifar10", tmp_path)[1] == "binary"


def test_read_cifar_binary_orders_planes_rgb_row_major(tmp_path):
    record = bytes([4]) + bytes([1] * 1024 + [2] * 1024 + [3] * 1024)
    record = bytearray(record)
    record[1 + 0 * 32 + 1] = 200          # R, row 0, column 1
    record[1 + 1024 + 2 * 32 + 0] = 201   # G, row 2, column 0
    path = tmp_path / "one.bin"
    path.write_bytes(bytes(record))
    images, labels = read_cifar_binary(path)
    assert labels.tolist() == [4]
    assert images.shape == (1, 3, 32, 32)
    assert images[0, 0, 0, 1] == 200 and images[0, 1, 2, 0] == 201
    assert images[0, 2].min() == images[0, 2].max() == 3


# ----------------------------------------------------------------- errors
def test_wrong_path_names_where_it_looked_and_how_to_fix(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as err:
        load_cifar10(missing)
    msg = str(err.value)
    for needle in (str(missing / "cifar-10-batches-bin"), str(missing / "cifar-10-batches-py"),
                   "--data-dir", "HEADGEOM_DATA", "download=True",
                   f"`headgeom data fetch cifar10 --data-dir {missing}`"):
        assert needle in msg
    with pytest.raises(FileNotFoundError, match="cifar-100-python"):
        load_cifar100(missing)


def test_missing_batch_is_named(tmp_path):
    folder = write_c10_binary(tmp_path)
    (folder / "data_batch_3.bin").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3.bin"):
        load_cifar10(tmp_path, "train")
    assert len(load_cifar10(tmp_path, "test")) == len(C10_TEST)  # test split still loads


def test_truncated_binary_names_file_and_sizes(tmp_path):
    folder = write_c10_binary(tmp_path)
    path = folder / "test_batch.bin"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError) as err:
        load_cifar10(tmp_path, "test")
    msg = str(err.value)
    assert str(path) in msg and str(3 * 3073 - 10) in msg and "3073" in msg


def test_truncated_cifar100_binary_uses_two_label_bytes(tmp_path):
    folder = write_c100_binary(tmp_path)
    path = folder / "test.bin"
    path.write_bytes(path.read_bytes()[:3073])  # whole CIFAR-10 record, not CIFAR-100
    with pytest.raises(ValueError, match="3074"):
        load_cifar100(tmp_path, "test")


def test_truncated_pickle_names_file(tmp_path):
    folder = write_c10_python(tmp_path)
    path = folder / "data_batch_2"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match="data_batch_2"):
        load_cifar10(tmp_path, "train")


def test_malformed_pickle_data_shape(tmp_path):
    folder = write_c10_python(tmp_path)
    write_pickle(folder / "test_batch", {"labels": [0], "data": np.zeros((1, 100), np.uint8)},
                 bytes, 2)
    with pytest.raises(ValueError, match=r"test_batch.*\(1, 100\)"):
        load_cifar10(tmp_path, "test")


def test_label_out_of_range_and_wrong_class_count(tmp_path):
    folder = write_c10_binary(tmp_path)
    (folder / "test_batch.bin").write_bytes(bytes([12]) + image_bytes(0))
    with pytest.raises(ValueError, match=r"test_batch.bin.*12"):
        load_cifar10(tmp_path, "test")
    (folder / "batches.meta.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match=r"batches.meta.txt lists 2"):
        load_cifar10(tmp_path, "train")


def test_bad_split_and_label_type():
    with pytest.raises(ValueError, match="split"):
        load_cifar10("/nonexistent", "val")
    with pytest.raises(ValueError, match="coarse"):
        load_cifar100("/nonexistent", "train", label_type="medium")
    from headgeom.data import load_cifar
    with pytest.raises(ValueError, match="label_type"):
        load_cifar("cifar10", "/nonexistent", "train", label_type="coarse")


# ----------------------------------------------------------------- unsafe pickles
class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_forbidden_global_is_refused_without_running(tmp_path):
    folder = write_c10_python(tmp_path)
    marker = tmp_path / "pwned"
    payload = {b"labels": [0], b"data": _Evil(marker)}
    (folder / "test_batch").write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(UnsafePickleError) as err:
        load_cifar10(tmp_path, "test")
    assert isinstance(err.value, ValueError)
    assert "system" in str(err.value) and "test_batch" in str(err.value)
    assert not marker.exists()
    # sanity: the same bytes with the stock unpickler would run the command
    pickle.loads(pickle.dumps(_Evil(marker)))
    assert marker.exists()


@pytest.mark.parametrize("module,name", [("builtins", "eval"), ("subprocess", "Popen"),
                                         ("numpy", "load"), ("builtins", "getattr"),
                                         ("numpy.testing", "_private")])
def test_other_globals_refused(module, name):
    payload = b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n."
    with pytest.raises(UnsafePickleError, match=f"{module}.{name}"):
        safe_pickle_load(payload)


def test_safe_unpickler_keeps_plain_data():
    obj = {"a": [1, 2.5, (3, "x")], b"b": {4, 5}, "arr": np.arange(6, dtype=np.int64)}
    for protocol in (2, 4, 5):
        out = safe_pickle_load(pickle.dumps(obj, protocol=protocol))
        assert out["a"] == obj["a"] and out[b"b"] == obj[b"b"]
        assert np.array_equal(out["arr"], obj["arr"])


# ----------------------------------------------------------------- data directory
def test_resolve_data_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("HEADGEOM_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir(None) == tmp_path / "home" / ".cache" / "headgeom" / "data"


def test_env_var_is_used_by_loader(tmp_path, monkeypatch):
    write_c10_binary(tmp_path)
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path))
    assert torch.equal(load_cifar10(None, "test").images, expected_images(C10_TEST))
