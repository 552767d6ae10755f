"""headgeom.runs.trained: a run folder read back into its trained method, settings and normalisation."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from headgeom.augment import get_recipe
from headgeom.checkpoints import load_checkpoint
from headgeom.data import DATASET_STATS, load_dataset
from headgeom.methods import METHODS
from headgeom.runs.trained import RunSettings, TrainedRunError, load_trained
from headgeom.train import TrainConfig, build_method_from_config


def test_an_older_record_loads_as_train_config_fills_it():
    # a record written before a field existed holds only some keys: the missing ones take the
    # defaults TrainConfig gives a new run (one declaration: TrainConfig extends RunSettings)
    assert {f.name for f in dataclasses.fields(RunSettings)} < {f.name for f in dataclasses.fields(TrainConfig)}
    old = RunSettings.from_config({"method": "simsiam", "data": "cifar10", "backbone_options": None})
    assert old == TrainConfig(method="simsiam", data="cifar10").run_settings()
    assert type(old) is RunSettings and old.backbone_options == {} and old.seed == 0 and old.normalize
    with pytest.raises(TrainedRunError, match="lacks"):
        RunSettings.from_config({"data": "cifar10"})


def test_no_method_recipe_normalises_on_its_own():
    # RunSettings.normalisation's rule (dataset stats iff normalize) holds only while recipes carry no mean/std
    for name, cls in METHODS.items():
        assert getattr(get_recipe(cls.RECIPE, 16), "mean", None) is None, name


def test_load_trained_rebuilds_the_checkpointed_method(one_step_run):
    run = load_trained(one_step_run)
    ck = torch.load(one_step_run / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    state = run.method.state_dict()
    assert set(state) == set(ck["method"])
    for k, v in ck["method"].items():
        assert torch.equal(state[k], v), k
    assert run.step == ck["step"] == 1 and not run.method.training
    assert run.settings == RunSettings.from_config(TrainConfig.from_dict(ck["config"]).to_dict())
    assert set(run.heads()) == {"head"} and set(run.heads(predictor=True)) == {"head", "pred"}
    # the same file through a checkpoint path and through checkpoints.load_checkpoint
    assert load_trained(one_step_run / "checkpoints" / "last.pt").settings == run.settings
    model = load_checkpoint(one_step_run)
    assert model.trained.settings == run.settings and model.release == "headgeom_simsiam"


def test_normalisation_is_the_training_sets_statistics(one_step_run):
    s = load_trained(one_step_run).settings
    assert s.data == "shapes" and s.data not in DATASET_STATS and s.normalize
    mean, std = (torch.tensor(v, dtype=torch.float64) for v in s.normalisation())
    x = load_dataset("shapes", "train", None, **s.data_options).images.double().div(255)  # (N, 3, H, W)
    torch.testing.assert_close(mean, x.mean(dim=(0, 2, 3)), atol=1e-6, rtol=0)
    torch.testing.assert_close(std, x.std(dim=(0, 2, 3), unbiased=False), atol=1e-3, rtol=0)
    assert dataclasses.replace(s, normalize=False).normalisation() == (None, None)
    cifar = dataclasses.replace(s, data="cifar10", data_options={})
    assert cifar.normalisation() == (tuple(DATASET_STATS["cifar10"].mean), tuple(DATASET_STATS["cifar10"].std))


def test_normalisation_measures_the_training_set_it_is_given(one_step_run):
    # training hands over the images it loaded (another set here, so a reload would be seen)
    s = load_trained(one_step_run).settings
    data = load_dataset("shapes", "train", None, **{**s.data_options, "n": 8})
    x = data.images.double().div(255)  # (8, 3, H, W)
    mean, std = s.normalisation(dataset=data)
    torch.testing.assert_close(torch.tensor(mean, dtype=torch.float64), x.mean(dim=(0, 2, 3)), atol=1e-9, rtol=0)
    torch.testing.assert_close(torch.tensor(std, dtype=torch.float64), x.std(dim=(0, 2, 3), unbiased=False),
                               atol=1e-9, rtol=0)
    assert mean != s.normalisation()[0]
    assert dataclasses.replace(s, normalize=False).normalisation(dataset=data) == (None, None)


def test_fresh_method_is_the_architecture_at_a_seeded_start(one_step_run):
    run = load_trained(one_step_run)
    a, b = run.fresh_method(7).state_dict(), run.fresh_method(7).state_dict()
    torch.manual_seed(7)
    ref = build_method_from_config(TrainConfig.from_dict(run.config)).state_dict()
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k], ref[k]) for k in ref)


def test_errors_say_what_is_missing(one_step_run, tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        load_trained(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(one_step_run, run)
    (run / "checkpoints" / "last.pt").unlink()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_trained(run)
    bad = tmp_path / "bad.pt"
    torch.save({"format": "headgeom.train.checkpoint", "version": 9, "config": {}, "method": {}}, bad)
    with pytest.raises(TrainedRunError, match="version 9"):
        load_trained(bad)
    torch.save({"format": "other"}, bad)
    with pytest.raises(TrainedRunError, match="not a headgeom training checkpoint"):
        load_trained(bad)
    ck = torch.load(one_step_run / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    ck["method"] = {k: v for k, v in ck["method"].items() if "projector" not in k}
    torch.save(ck, bad)
    with pytest.raises(TrainedRunError, match="does not fill its 'simsiam' method exactly"):
        load_trained(bad)
    ck["config"] = {k: v for k, v in ck["config"].items() if k != "method"}
    torch.save(ck, bad)
    with pytest.raises(TrainedRunError, match=r"lacks \['method'\]"):
        load_trained(bad)
    # an older config.json that held the TrainConfig at top level still loads
    record = json.loads((one_step_run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(record["config"]))
    shutil.copy(one_step_run / "checkpoints" / "last.pt", run / "checkpoints" / "last.pt")
    assert load_trained(run).settings == load_trained(one_step_run).settings
