"""Bad released files: a wrong sha256, a pickle naming any other global (nothing runs), a truncated
file, a missing key, a foreign layout: one ReleasedFileError line naming the file, and nothing
written. Hostile pickles are pinned into the test's own manifest, so they reach the unpickler."""
from __future__ import annotations

import os
import pickle
import subprocess

import numpy as np
import pytest

from released_copy import write_copy
from headgeom.released import (ReleasedFileError, check_copy, read_collapse, read_guillotine, read_hessian, read_log,
                               read_orbits, resolve_released_dir, verify_file)
from headgeom.released.files import read_npy_dict

COLLAPSE = "results/cifar10/resnet18/collapse_results.npy"
GUILLOTINE = "results/cifar10/resnet18/guillotine_results.npy"
HESSIAN = "results/cifar10/resnet18/hessian_tracker/raw_data_normal_swish.npz"


@pytest.fixture
def copy(tmp_path):
    return write_copy(tmp_path / "copy")


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


class _System:
    """Pickles as a call of os.system (``posix.system``) that would create ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class _Popen:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return subprocess.Popen, (["touch", str(self.marker)],)


class _Eval:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return eval, (f"open({str(self.marker)!r}, 'w')",)


@pytest.mark.parametrize("payload,name", [(_System, "system"), (_Popen, "Popen"), (_Eval, "eval")])
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_naming_another_global_is_refused_and_nothing_runs(copy, tmp_path, payload, name, protocol):
    marker = tmp_path / "pwned"
    evil = {"backbone_acc_linear": 0.5, "head_acc_linear": 0.4, "backbone_acc_mlp": 0.5,
            "head_acc_mlp": payload(marker), "dataset": "cifar10"}
    path = copy.file(GUILLOTINE)
    with open(path, "wb") as fh:  # what numpy.save writes for a dict, at the chosen pickle protocol
        np.lib.format.write_array_header_1_0(fh, {"descr": "|O", "fortran_order": False, "shape": ()})
        pickle.dump(np.array(evil, dtype=object), fh, protocol=protocol)
    copy.repin()  # the hostile file matches the manifest: only the unpickler stands in the way
    with pytest.raises(ReleasedFileError) as err:
        read_guillotine(copy.root, "cifar10", "resnet18", copy.manifest)
    msg = _one_line(err)
    assert str(path) in msg and name in msg and "nothing was executed" in msg
    assert not marker.exists()


def test_the_hostile_payload_would_run_under_the_stock_unpickler(tmp_path):
    """So the refusals above are refusals of working exploits."""
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(_System(marker)))
    assert marker.exists()


def test_against_the_pinned_manifest_a_hostile_file_fails_its_sha256_first(copy, tmp_path):
    marker = tmp_path / "pwned"
    path = copy.file(GUILLOTINE)
    pinned = copy.manifest
    np.save(path, {"x": _System(marker)}, allow_pickle=True)
    with pytest.raises(ReleasedFileError, match="sha256|bytes") as err:
        read_guillotine(copy.root, "cifar10", "resnet18", pinned)
    assert str(path) in _one_line(err) and not marker.exists()


def test_wrong_sha256_of_the_same_size(copy):
    path = copy.file(COLLAPSE)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ReleasedFileError) as err:
        read_collapse(copy.root, "cifar10", "resnet18", copy.manifest)
    msg = _one_line(err)
    assert str(path) in msg and "sha256" in msg and copy.manifest.entry(COLLAPSE).sha256 in msg


def test_truncated_files(copy):
    for rel, read in ((COLLAPSE, lambda: read_collapse(copy.root, "cifar10", "resnet18", copy.manifest)),
                      (HESSIAN, lambda: read_hessian(copy.root, "normal_swish", copy.manifest))):
        path = copy.file(rel)
        path.write_bytes(path.read_bytes()[:-40])
        with pytest.raises(ReleasedFileError, match="truncated") as err:  # against the pinned size
            read()
        assert str(path) in _one_line(err)
    copy.repin()  # pinned as truncated: the parser itself must still refuse them
    with pytest.raises(ReleasedFileError, match="truncated") as err:
        read_collapse(copy.root, "cifar10", "resnet18", copy.manifest)
    assert str(copy.file(COLLAPSE)) in _one_line(err)
    with pytest.raises(ReleasedFileError, match="not a readable .npz") as err:
        read_hessian(copy.root, "normal_swish", copy.manifest)
    assert str(copy.file(HESSIAN)) in _one_line(err)


def test_missing_file(copy):
    copy.file(GUILLOTINE).unlink()
    with pytest.raises(ReleasedFileError, match="is missing") as err:
        read_guillotine(copy.root, "cifar10", "resnet18", copy.manifest)
    assert str(copy.file(GUILLOTINE)) in _one_line(err)


@pytest.mark.parametrize("rel,edit,key", [
    (GUILLOTINE, lambda d: d.pop("head_acc_mlp"), "head_acc_mlp"),
    (COLLAPSE, lambda d: d["relu_bn_True_lr_small"].pop("raw"), "raw"),
    (COLLAPSE, lambda d: d["relu_bn_True_lr_small"].pop("cond_nums_std"), "cond_nums_std"),
    ("results/cifar10/resnet18/orbit_visualization.npy", lambda d: d.pop("orbit_ids"), "orbit_ids"),
])
def test_missing_key_in_a_pickled_dict(copy, rel, edit, key):
    path = copy.file(rel)
    data = read_npy_dict(path)
    edit(data)
    np.save(path, data, allow_pickle=True)
    copy.repin()
    checks = {c.path: c for c in check_copy(copy.root, copy.manifest)}
    assert checks[rel].status == "bad" and repr(key) in checks[rel].detail and str(path) in checks[rel].detail
    assert sum(c.status != "ok" for c in checks.values()) == 1


def test_missing_key_in_an_npz_and_an_object_array(copy):
    path = copy.file(HESSIAN)
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    np.savez(path, **{k: v for k, v in arrays.items() if k != "min_eigenvalues"})
    copy.repin()
    with pytest.raises(ReleasedFileError, match="'min_eigenvalues' is missing") as err:
        read_hessian(copy.root, "normal_swish", copy.manifest)
    assert str(path) in _one_line(err)
    np.savez(path, **{**arrays, "min_eigenvalues": np.array([_System("/nonexistent")], dtype=object)})
    copy.repin()
    with pytest.raises(ReleasedFileError, match="object array") as err:
        read_hessian(copy.root, "normal_swish", copy.manifest)


def test_wrong_shapes_and_layouts(copy):
    path = copy.file("results/cifar10/resnet18/orbit_visualization.npy")
    data = read_npy_dict(path)
    data["num_rotations"] = 5  # the file says 5 angles per orbit, its rows give 4
    np.save(path, data, allow_pickle=True)
    np.save(copy.file(COLLAPSE), np.zeros((3, 4)))  # a plain array, not a saved dict
    log = copy.file("results/cifar100/resnet18/experiment_log.txt")
    log.write_text("\n".join(line for line in log.read_text().splitlines() if "Batch size" not in line))
    copy.repin()
    with pytest.raises(ReleasedFileError, match="the file says 5"):
        read_orbits(copy.root, "resnet18", copy.manifest)
    with pytest.raises(ReleasedFileError, match="not a saved dict"):
        read_collapse(copy.root, "cifar10", "resnet18", copy.manifest)
    with pytest.raises(ReleasedFileError, match="does not state 'batch_size'") as err:
        read_log(copy.root, "cifar100", "resnet18", copy.manifest)
    assert str(log) in _one_line(err)


def test_reading_writes_nothing(copy):
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.root.rglob("*") if p.is_file()}
    copy.file(COLLAPSE).write_bytes(b"garbage")
    before[copy.file(COLLAPSE)] = (copy.file(COLLAPSE).stat().st_mtime_ns, b"garbage")
    checks = check_copy(copy.root, copy.manifest)
    assert [c.status for c in checks].count("bad") == 1
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.root.rglob("*") if p.is_file()}
    assert after == before


def test_where_the_copy_is(tmp_path, monkeypatch):
    monkeypatch.delenv("HEADGEOM_RELEASED", raising=False)
    with pytest.raises(ReleasedFileError, match="--released DIR or set HEADGEOM_RELEASED"):
        resolve_released_dir(None)
    monkeypatch.setenv("HEADGEOM_RELEASED", str(tmp_path))
    assert resolve_released_dir(None) == tmp_path
    assert resolve_released_dir(tmp_path, option="DIR") == tmp_path
    with pytest.raises(ReleasedFileError, match="--released .* is not a folder"):
        resolve_released_dir(tmp_path / "absent")
    with pytest.raises(ReleasedFileError, match="not one of the 20 pinned"):
        verify_file(tmp_path, "results/other.npy")
