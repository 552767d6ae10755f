"""Property-based fuzzing of checkpoint files (headgeom.checkpoints.load_checkpoint, which reads
through headgeom.runs.safe_load) with hypothesis.

The property, for any file a user may hand over: the model is loaded, or one of the documented
errors is raised (CheckpointFormatError, UnsafeCheckpointError, CheckpointArchitectureError, all
ValueErrors) with a one-line message; never another exception, and no pickled code runs (a payload
would leave a marker file). The files are damaged copies (truncations, flipped, overwritten,
deleted, repeated and inserted bytes, aimed at the pickle and the zip directory half the time) of
real small checkpoints of every layout headgeom reads: DINO ViT and ResNet full checkpoints,
VICReg, Barlow Twins, SimSiam, torchvision and ViT backbones, both torch containers, and a
checkpoint of headgeom's own training. Pickles naming any other global are fuzzed too. A last
target runs ``headgeom checkpoint FILE`` on a few: exit 0, or exit 2 with one line, nothing
written. Budgets and settings: tests/fuzz_inputs.py.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_inputs import RunsCode, budget, damaged, listing, one_line
from headgeom.backbones import VisionTransformer, resnet18, resnet50
from headgeom.checkpoints import (CheckpointArchitectureError, CheckpointFormatError, LoadedModel,
                                  UnsafeCheckpointError, load_checkpoint)
from headgeom.cli import main
from headgeom.train import TrainConfig, build_method_from_config, save_checkpoint
from official_models import (BarlowTwins, SimSiam, VICReg, dino_full_checkpoint, method_full_checkpoint,
                             simsiam_checkpoint)

pytestmark = pytest.mark.usefixtures("one_thread")

DOCUMENTED = (CheckpointFormatError, UnsafeCheckpointError, CheckpointArchitectureError)


def _vit() -> VisionTransformer:
    return VisionTransformer(img_size=16, patch_size=8, embed_dim=64, depth=1, num_heads=1)


def _save(obj, legacy: bool = False) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


@functools.cache
def official_files() -> dict[str, bytes]:
    """A small file of every official layout (the release id, and the container when legacy)."""
    torch.manual_seed(0)
    vit, _ = dino_full_checkpoint(_vit, in_dim=64, out_dim=24, nlayers=3, hidden_dim=16, bottleneck_dim=8,
                                  norm_last_layer=False)
    vit["args"] = argparse.Namespace(arch="vit_small", patch_size=8, out_dim=24)
    r50, _ = dino_full_checkpoint(lambda: resnet50(width=0.0625), in_dim=128, out_dim=20, use_bn=True, nlayers=2,
                                  hidden_dim=16, bottleneck_dim=8, plain_last=True)
    r18, _ = dino_full_checkpoint(lambda: resnet18(width=0.125), in_dim=64, out_dim=20, nlayers=2, hidden_dim=16,
                                  bottleneck_dim=8)
    torchvision = dict(resnet18(width=0.125, cifar_stem=False).state_dict())
    torchvision["fc.weight"], torchvision["fc.bias"] = torch.randn(10, 64), torch.randn(10)
    return {
        "dino_vit": _save(vit), "dino_vit (legacy)": _save(vit, legacy=True),
        "dino_resnet50": _save(r50), "dino_resnet18": _save(r18),
        "vicreg": _save(method_full_checkpoint(VICReg(resnet18(width=0.125), 64, "32-32-24"))),
        "barlow_twins": _save(method_full_checkpoint(BarlowTwins(resnet18(width=0.125), 64, "32-24"))),
        "simsiam (legacy)": _save(simsiam_checkpoint(SimSiam(resnet18(width=0.125), dim=24, pred_dim=8)),
                                  legacy=True),
        "torchvision_resnet": _save({"state_dict": {f"module.{k}": v for k, v in torchvision.items()}}),
        "vit_backbone": _save(_vit().state_dict()),
    }


def _own_run_checkpoint() -> bytes:
    """What headgeom's trainer saves (headgeom.train.save_checkpoint), for a small SimSiam method."""
    config = TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.125}, head="64-16-8",
                         predictor="8-4-8", device="cpu", epochs=2)
    model = build_method_from_config(config)
    state = {"step": 3, "epoch": 0, "method": model.state_dict(), "optimizer": {"state": {}, "param_groups": []},
             "data_generator": torch.zeros(8, dtype=torch.uint8), "aug_generator": torch.zeros(8, dtype=torch.uint8),
             "torch_rng": torch.get_rng_state(), "cuda_rng": None, "config": config.to_dict()}
    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint(Path(tmp) / "last.pt", state)
        return (Path(tmp) / "last.pt").read_bytes()


@functools.cache
def files() -> dict[str, bytes]:
    """Every official layout and a checkpoint of headgeom's own training."""
    return {**official_files(), "headgeom_simsiam": _own_run_checkpoint()}


def _hot(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges where damage matters most: the pickle (a zip's data.pkl, a legacy file's start)
    and, in a zip, its central directory."""
    if not data.startswith(b"PK\x03\x04"):
        return [(0, min(len(data), 4096))]
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("data.pkl"))
        directory = zf.start_dir
    return [(info.header_offset, info.header_offset + 100 + info.compress_size), (directory, len(data))]


@st.composite
def damaged_checkpoint(draw, files: dict[str, bytes]) -> tuple[str, bytes]:
    """(layout, damaged bytes of its file)."""
    name = draw(st.sampled_from(sorted(files)), label="layout")
    good = files[name]
    if draw(st.booleans()):  # aim at a region that holds structure rather than tensor bytes
        lo, hi = draw(st.sampled_from(_hot(good)))
        return name, good[:lo] + draw(damaged(good[lo:hi])) + good[hi:]
    return name, draw(damaged(good))


def _check(path: Path, marker: Path) -> LoadedModel | None:
    try:
        model = load_checkpoint(path)
    except DOCUMENTED as err:
        event(type(err).__name__)
        one_line(str(err))
        return None
    finally:
        assert not marker.exists()
    event("loaded")
    assert model.backbone is not None
    return model


@budget(60)
@given(st.data())
def test_a_damaged_checkpoint_loads_or_fails_in_one_line(data):
    name, content = data.draw(damaged_checkpoint(files()), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pth"
        path.write_bytes(content)
        _check(path, Path(tmp) / "code-ran")


GLOBALS = st.one_of(
    st.sampled_from(["posix system", "os system", "builtins eval", "builtins exec", "__builtin__ eval",
                     "subprocess Popen", "builtins getattr", "importlib import_module", "torch load",
                     "torch.serialization load", "numpy load", "pickle loads", "collections OrderedDict",
                     "torch._utils _rebuild_tensor_v2", "argparse Namespace", "__main__ exclude_bias_and_norm"]),
    st.builds(lambda m, n: f"{m} {n}", st.text("abcdefghijklmnopqrstuvwxyz_.", min_size=1, max_size=12),
              st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)))


def _pickle_calling(global_: str, marker: Path) -> bytes:
    """A protocol-2 pickle of {"model": GLOBAL("touch MARKER")} (what a hostile file could hold)."""
    arg = f"touch {marker}".encode()
    return (b"\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01c" + global_.replace(" ", "\n", 1).encode() + b"\nq\x02"
            + b"X" + len(arg).to_bytes(4, "little") + arg + b"\x85q\x03Rq\x04s.")


@budget(20)
@given(GLOBALS, st.booleans())
def test_a_pickle_naming_any_global_runs_nothing(global_, in_zip):
    with tempfile.TemporaryDirectory() as tmp:
        marker, path = Path(tmp) / "code-ran", Path(tmp) / "model.pth"
        payload = _pickle_calling(global_, marker)
        if in_zip:  # torch's zip layout: archive/data.pkl, archive/version
            with zipfile.ZipFile(path, "w") as zf:
                zf.writestr("archive/data.pkl", payload)
                zf.writestr("archive/version", "3\n")
        else:  # the legacy stream: magic number, protocol, system info, then the object
            head = io.BytesIO()
            torch.save({}, head, _use_new_zipfile_serialization=False)
            path.write_bytes(head.getvalue()[:_legacy_object_start(head.getvalue())] + payload + b"\x80\x02]q\x00.")
        _check(path, marker)


def _legacy_object_start(data: bytes) -> int:
    """Where the pickled object starts in a legacy torch.save stream (after three small pickles)."""
    import pickletools

    stream = io.BytesIO(data)
    for _ in range(3):
        for _op in pickletools.genops(stream):
            pass
    return stream.tell()


def test_the_hostile_pickle_would_run_under_the_stock_unpickler(tmp_path):
    """So the refusals above are refusals of a working payload."""
    import pickle

    marker = tmp_path / "code-ran"
    pickle.loads(_pickle_calling("posix system", marker))
    assert marker.exists()
    assert pickle.loads(pickle.dumps(RunsCode(marker))) == 0


@budget(15)
@given(st.data())
def test_the_command_exits_0_or_2_with_one_line_and_writes_nothing(data):
    name, content = data.draw(damaged_checkpoint(files()), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp)
        (sandbox / "model.pth").write_bytes(content)
        before = listing(sandbox)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), contextlib.chdir(sandbox), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = main(["checkpoint", "model.pth"])
        assert code in (0, 2), (code, err.getvalue())
        leaked = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        assert not leaked, leaked  # a warning would be a second line on stderr
        if code == 2:
            assert one_line(err.getvalue()).startswith("headgeom checkpoint: error: ")
        assert listing(sandbox) == before


# ---- regressions the fuzzing found in safe_load

def _zip_checkpoint(path: Path, pickle_bytes: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:  # torch's zip layout: archive/data.pkl, archive/version
        zf.writestr("archive/data.pkl", pickle_bytes)
        zf.writestr("archive/version", "3\n")
    return path


def _central_field(data: bytes, offset: int, value: int) -> bytes:
    at = data.index(b"PK\x01\x02") + offset
    return data[:at] + value.to_bytes(2, "little") + data[at + 2:]


@pytest.mark.parametrize("offset, value, said", [(6, 64, "zip file version 6.4"), (8, 0x1, "encrypted")])
def test_a_damaged_zip_member_header_is_a_format_error(tmp_path, offset, value, said):
    path = tmp_path / "model.pth"
    path.write_bytes(_central_field(files()["vicreg"], offset, value))
    with pytest.raises(CheckpointFormatError, match="is a damaged zip checkpoint") as err:
        load_checkpoint(path)
    assert said in one_line(str(err.value))


def test_an_allowed_global_called_with_wrong_arguments_is_a_format_error(tmp_path):
    path = _zip_checkpoint(tmp_path / "model.pth", _pickle_calling("torch._utils _rebuild_tensor_v2", tmp_path / "x"))
    with pytest.raises(CheckpointFormatError, match=r"could not be read .*TypeError") as err:
        load_checkpoint(path)
    one_line(str(err.value))


def test_torchs_own_refusal_is_one_line_with_its_reason(tmp_path):
    path = _zip_checkpoint(tmp_path / "model.pth", b"\x80\x02X\x03\x00\x00\x00abcQ.")  # a persistent id that is a str
    with pytest.raises(UnsafeCheckpointError) as err:
        load_checkpoint(path)
    message = one_line(str(err.value))
    assert "persistent_load id must be tuple or int" in message and "PyTorch 2.6" not in message


def test_a_legacy_stream_whose_storage_keys_do_not_match_is_a_format_error(tmp_path):
    import pickle

    head = io.BytesIO()
    torch.save({}, head, _use_new_zipfile_serialization=False)
    start = _legacy_object_start(head.getvalue())
    path = tmp_path / "model.pth"
    path.write_bytes(head.getvalue()[:start] + pickle.dumps({}, protocol=2) + pickle.dumps(["x"], protocol=2))
    with pytest.raises(CheckpointFormatError, match="AssertionError") as err:  # torch asserts the keys
        load_checkpoint(path)
    one_line(str(err.value))


def test_a_pickle_of_another_protocol_loads_without_a_warning(tmp_path):
    import pickle

    from headgeom.checkpoints import safe_load

    path = _zip_checkpoint(tmp_path / "model.pth", pickle.dumps({"epoch": 3}, protocol=3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "Detected pickle protocol 3" would be a second line on stderr
        assert safe_load(path).obj == {"epoch": 3}
