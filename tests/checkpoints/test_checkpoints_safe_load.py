"""headgeom.runs.safe_load: allow-listed loading that never runs pickled code.

Hostile files reach for os.system / builtins.eval / exec to create a marker file; every test
checks the refusal message names the global and that the marker was never written.
"""
from __future__ import annotations

import argparse
import builtins
import hashlib
import importlib
import os
import pickle
import sys
import uuid
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from headgeom.checkpoints import (
    CheckpointFormatError,
    InertFunction,
    InertNamespace,
    UnsafeCheckpointError,
    check_sha256,
    file_sha256,
    safe_load,
    scan_globals,
)


class _System:
    """Unpickling this calls os.system(f"touch {marker}")."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Eval:
    """Unpickling this calls builtins.eval on code that writes the marker."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.eval, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def _state() -> OrderedDict:
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    return m.state_dict()


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


@pytest.mark.parametrize("legacy", [False, True])
def test_plain_containers_round_trip(tmp_path: Path, legacy: bool) -> None:
    sd = _state()
    obj = {"epoch": 7, "model": sd, "args": argparse.Namespace(lr=0.5, arch="vit_small", flags=[1, 2]),
           "param": torch.nn.Parameter(torch.arange(3.0)), "np_scalar": np.float32(1.5),
           "np_array": np.arange(4, dtype=np.int64), "meta": ("a", 1.0, None, {"k": b"bytes"})}
    path = tmp_path / "ok.pth"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    loaded = safe_load(path)
    assert loaded.container == ("legacy" if legacy else "zip")
    assert loaded.obj["epoch"] == 7
    for k, v in sd.items():
        assert torch.equal(loaded.obj["model"][k], v), k
    args = loaded.obj["args"]
    assert isinstance(args, InertNamespace) and not isinstance(args, argparse.Namespace)
    assert args.as_dict() == {"lr": 0.5, "arch": "vit_small", "flags": [1, 2]}
    assert loaded.stand_ins == ("argparse.Namespace",)
    assert isinstance(loaded.obj["param"], torch.nn.Parameter) and torch.equal(loaded.obj["param"], torch.arange(3.0))
    assert loaded.obj["np_scalar"] == np.float32(1.5)
    np.testing.assert_array_equal(loaded.obj["np_array"], np.arange(4))
    assert loaded.obj["meta"] == ("a", 1.0, None, {"k": b"bytes"})
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.size_bytes == path.stat().st_size


def _throwaway_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, object, Path]:
    """A module that writes IMPORTED next to itself when imported, defining exclude_bias_and_norm."""
    name = f"throwaway_vicreg_{uuid.uuid4().hex[:8]}"
    imported = tmp_path / "IMPORTED"
    (tmp_path / f"{name}.py").write_text(
        "import pathlib\n"
        "pathlib.Path(__file__).with_name('IMPORTED').write_text('imported')\n"
        "def exclude_bias_and_norm(p):\n    return p.ndim == 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    assert imported.exists()
    return name, mod.exclude_bias_and_norm, imported


@pytest.mark.parametrize("legacy", [False, True])
def test_pickled_function_reference_becomes_inert_without_import(tmp_path: Path, monkeypatch, legacy: bool) -> None:
    name, fn, imported = _throwaway_module(tmp_path, monkeypatch)
    optimizer = {"state": {}, "param_groups": [{"lr": 0.0, "weight_decay": 1e-6, "weight_decay_filter": fn,
                                                "lars_adaptation_filter": fn, "params": [0, 1]}]}
    path = tmp_path / "resnet50_fullckpt.pth"
    torch.save({"epoch": 1, "model": _state(), "optimizer": optimizer}, path,
               _use_new_zipfile_serialization=not legacy)
    # forget the module: loading must neither import it (marker) nor need it
    del sys.modules[name]
    imported.unlink()
    assert f"{name}.exclude_bias_and_norm" in scan_globals(path)[1]
    loaded = safe_load(path)
    assert not imported.exists() and name not in sys.modules
    group = loaded.obj["optimizer"]["param_groups"][0]
    stand_in = group["weight_decay_filter"]
    assert isinstance(stand_in, InertFunction) and (stand_in.module, stand_in.name) == (name, "exclude_bias_and_norm")
    assert group["lars_adaptation_filter"] == stand_in
    assert loaded.stand_ins == (f"{name}.exclude_bias_and_norm",)
    with pytest.raises(RuntimeError, match="inert stand-in"):
        stand_in(torch.zeros(3))


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("evil, global_name", [(_System, "posix.system"), (_Eval, "builtins.eval")])
def test_hostile_pickle_is_refused_and_nothing_runs(tmp_path: Path, marker: Path, evil, global_name: str,
                                                    legacy: bool) -> None:
    if global_name == "posix.system" and os.name != "posix":
        pytest.skip("os.system pickles as nt.system on Windows")
    path = tmp_path / "checkpoint.pth"
    torch.save({"model": _state(), "payload": evil(marker)}, path, _use_new_zipfile_serialization=not legacy)
    with pytest.raises(UnsafeCheckpointError, match=f"'{global_name}'") as info:
        safe_load(path)
    assert "nothing was executed" in str(info.value)
    assert not marker.exists()


def test_protocol4_stack_global_is_refused(tmp_path: Path, marker: Path) -> None:
    path = tmp_path / "p4.pth"
    torch.save({"model": _state(), "payload": _System(marker)}, path, pickle_protocol=4)
    with pytest.raises(UnsafeCheckpointError, match="STACK_GLOBAL"):
        safe_load(path)
    assert not marker.exists()


def test_bare_pickle_is_not_a_checkpoint(tmp_path: Path, marker: Path) -> None:
    path = tmp_path / "bare.pth"
    path.write_bytes(pickle.dumps({"a": _System(marker)}, protocol=2))
    with pytest.raises((UnsafeCheckpointError, CheckpointFormatError)) as info:
        safe_load(path)
    assert "posix.system" in str(info.value) or "not a torch checkpoint" in str(info.value)
    assert not marker.exists()


def test_stand_in_cannot_be_abused_as_a_callable(tmp_path: Path, marker: Path) -> None:
    """A pickle that REDUCE-calls the allowed name gets the inert stand-in, which only raises."""

    class CallFilter:
        def __reduce__(self):
            return (fake.exclude_bias_and_norm, (str(marker),))

    class fake:  # noqa: N801 - its qualified name is what gets pickled
        @staticmethod
        def exclude_bias_and_norm(p):
            Path(p).write_text("ran")

    fake.exclude_bias_and_norm.__module__ = "evil_module"
    fake.exclude_bias_and_norm.__qualname__ = "exclude_bias_and_norm"
    sys.modules["evil_module"] = type(sys)("evil_module")
    sys.modules["evil_module"].exclude_bias_and_norm = fake.exclude_bias_and_norm
    try:
        path = tmp_path / "abuse.pth"
        torch.save({"x": CallFilter()}, path)
    finally:
        del sys.modules["evil_module"]
    with pytest.raises(CheckpointFormatError, match="inert stand-in"):
        safe_load(path)
    assert not marker.exists()


def _valid(tmp_path: Path, legacy: bool) -> Path:
    path = tmp_path / ("legacy.pth" if legacy else "zip.pth")
    torch.save({"model": _state(), "big": torch.randn(2000)}, path, _use_new_zipfile_serialization=not legacy)
    return path


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("keep", [0.004, 0.05, 0.5, 0.95])
def test_truncated_files_give_clear_errors(tmp_path: Path, legacy: bool, keep: float) -> None:
    full = _valid(tmp_path, legacy).read_bytes()
    cut = tmp_path / "cut.pth"
    cut.write_bytes(full[: int(len(full) * keep)])
    with pytest.raises(CheckpointFormatError, match="truncated|damaged"):
        safe_load(cut)


def test_not_a_checkpoint(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pth"
    empty.write_bytes(b"")
    text = tmp_path / "text.pth"
    text.write_text("hello, I am not a checkpoint\n")
    for path in (empty, text):
        with pytest.raises(CheckpointFormatError, match="not a torch checkpoint"):
            safe_load(path)
    with pytest.raises(FileNotFoundError, match="missing.pth does not exist$"):
        safe_load(tmp_path / "missing.pth")


def test_file_sha256_and_official_checks(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    data = os.urandom(3 << 20)
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    assert file_sha256(path, chunk=1 << 16) == sha

    known = check_sha256("resnet50_fullckpt.pth", sha, "vicreg")
    assert known.status == "unknown" and sha in known.message
    assert "no verified official sha256" in known.message
    assert check_sha256(f"resnet18-{sha[:8]}.pth", sha).status == "match"
    wrong = "0" * 8 if not sha.startswith("0" * 8) else "1" * 8
    bad = check_sha256(f"resnet18-{wrong}.pth", sha)
    assert bad.status == "mismatch" and "download it again" in bad.message
    assert check_sha256("my_run.pth", sha).status == "unknown"
