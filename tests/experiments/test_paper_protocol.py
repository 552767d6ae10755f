"""The paper presets against the paper's protocol each experiment declares (``Experiment.protocol``,
headgeom.report.paper_protocol, docs/paper.md §3)."""
import pytest

from headgeom.experiments.registry import load_all, protocols
from headgeom.experiments.runner import plan_experiments
from headgeom.report.paper_protocol import PaperProtocol, as_set, preset_settings, show, train_settings

load_all()
PROTOCOLS = protocols()
PROTOCOL = {k: p.settings for k, p in PROTOCOLS.items()}
DIFFERENCES = {k: p.differences for k, p in PROTOCOLS.items() if p.differences}


def _paper(exp_id, *overrides):
    """The paper preset of ``exp_id`` with ``--set`` overrides (nested keys: train.epochs=49)."""
    (exp, config, cells, n_seeds, _), = plan_experiments([exp_id], "paper", None, overrides=overrides)[0]
    return exp, config, cells, n_seeds


def _differing(exp_id, *overrides):
    exp, config, cells, n_seeds = _paper(exp_id, *overrides)
    ours = preset_settings(exp, config, cells, n_seeds, list(PROTOCOL[exp_id]))
    unread = sorted(set(PROTOCOL[exp_id]) - set(ours))
    assert not unread, f"{exp_id}: the preset does not say {unread}"
    return {k for k, v in PROTOCOL[exp_id].items() if as_set(v) != as_set(ours[k])}


@pytest.mark.parametrize("exp_id", sorted(PROTOCOL))
def test_the_paper_preset_equals_the_paper_except_the_listed_differences(exp_id):
    listed = DIFFERENCES.get(exp_id, {})
    assert _differing(exp_id) == set(listed), "a difference is unlisted, or a listed one is not one any more"
    assert all(len(why) > 20 for why in listed.values()), "every difference needs its reason"


def test_every_training_experiment_has_the_paper_protocol():
    training = sorted(e.id for e in load_all().values() if e.train_config is not None)
    assert training and set(training) <= set(PROTOCOL), f"no protocol for {set(training) - set(PROTOCOL)}"
    # the experiments the paper states settings for, each declaring its own (C3, C5, C10: the theory checks' setups)
    assert set(PROTOCOL) == {"ABLATION", "C3", "C5", "C8", "C9", "C10", "C11", "C12", "GRID"}


def test_a_protocol_names_only_settings_the_paper_states():
    assert PROTOCOLS["C8"].described["curvature"].startswith("exact eigenvalues")
    with pytest.raises(ValueError, match="differences name settings the paper's do not: \\['lr'\\]"):
        PaperProtocol({"epochs": 50}, differences={"lr": "a reason long enough to be one"})
    with pytest.raises(ValueError, match="described name settings"):
        PaperProtocol({"epochs": 50}, described={"curvature": "in words"})


@pytest.mark.parametrize("exp_id, overrides, key", [
    ("GRID", ["train.epochs=49"], "epochs"), ("GRID", ["train.batch_size=256"], "batch_size"),
    ("C8", ["train.lr=0.5"], "lr"), ("C11", ["train.data=shapes"], "dataset"), ("C11", ["orbit_steps=8"], "orbit_steps"),
    ("C9", ['train.backbone_options={"width": 0.5}'], "backbone"), ("GRID", ["seeds=2"], "seeds"),
    ("C11", ["orbit_per_class=4"], "orbit_per_class"),
    ("C12", ['settings=[["cifar10", "resnet18"]]'], "backbone"), ("C12", ["settings=null"], "runs"),
])
def test_a_preset_that_leaves_the_paper_is_caught(exp_id, overrides, key):
    assert key in _differing(exp_id, *overrides) - set(DIFFERENCES.get(exp_id, {}))


def test_train_settings_and_show_read_a_train_config():
    from headgeom.train import TrainConfig

    tc = TrainConfig(method="simclr_oneway", backbone_options={"width": 0.5}, lr=0.001, batch_size=64)
    s = train_settings(tc)
    assert (s["backbone"], s["augmentation"], s["lr"], s["batch_size"], s["predictor"]) == (
        "resnet18(width=0.5)", "paper_simclr", 0.001, 64, None)
    assert show((0.5, 0.005, None)) == "0.005, 0.5, none" and show(1e-3) == "0.001"
