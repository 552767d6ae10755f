"""``--set KEY=VALUE`` overrides (headgeom.overrides): nested keys reach the nested TrainConfig, unknown
keys and the old flat names of the training recipe fail with a message naming the key to write."""
import dataclasses

import pytest

from headgeom.cli import main
from headgeom.experiments.c8_hessian_tracking import C8Config
from headgeom.experiments.c12_guillotine import C12Config
from headgeom.experiments.runner import plan_experiments
from headgeom.overrides import apply_overrides, parse_assignment


def test_nested_keys_replace_the_nested_train_config_and_nothing_else():
    base = C8Config()
    cfg = apply_overrides(base, ["train.batch_size=64", "train.data=cifar10", "train.max_steps=null", "seeds=3"])
    assert (cfg.train.batch_size, cfg.train.data, cfg.train.max_steps, cfg.seeds) == (64, "cifar10", None, 3)
    changed = {k for k, v in dataclasses.asdict(cfg.train).items() if v != dataclasses.asdict(base.train)[k]}
    assert changed == {"batch_size", "data", "max_steps"}
    assert base.train.batch_size == 32  # the preset itself is untouched (frozen, replaced)


def test_values_take_the_fields_shape_json_lists_become_tuples_ints_become_floats():
    cfg = apply_overrides(C8Config(), ['readings=["tangential"]', "train.lr=1", 'train.data_options={"n": 64}'])
    assert cfg.readings == ("tangential",) and cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert cfg.train.data_options == {"n": 64}
    cfg = apply_overrides(C12Config(), ['settings=[["cifar10", "vit_tiny"]]'])
    assert cfg.settings == (("cifar10", "vit_tiny"),)
    assert parse_assignment("train.data=cifar10") == (["train", "data"], "cifar10")


@pytest.mark.parametrize("assignment, message", [
    ("batch_size=64", r"C8Config has no key 'batch_size'; it is train.batch_size now.*--set train.batch_size="),
    ("width=0.5", r"C8Config has no key 'width'; known keys: .*block_samples"),
    ("train.bogus=1", r"TrainConfig has no key 'bogus'; known keys: .*batch_size"),
    ("train=1", r"C8Config.train is a nested config; set one of its keys"),
    ("seeds.n=1", r"C8Config.seeds is not a nested config"),
    ("train.batch_size", r"is not KEY=VALUE"),
    ("train.batch_size=0", r"train.batch_size=0.*TrainConfig.batch_size must be a positive int, got 0"),
])
def test_unknown_keys_old_flat_names_and_bad_values_fail_clearly(assignment, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(C8Config(), [assignment])


def test_the_plan_applies_overrides_to_every_selected_preset_and_names_the_experiment_that_lacks_a_key():
    plan, _ = plan_experiments(["C8", "C12"], "quick", None, overrides=("train.batch_size=16",))
    assert [config.train.batch_size for _, config, *_ in plan] == [16, 16]
    tc = plan[0][0].train_config(plan[0][1], plan[0][2][0])
    assert tc.batch_size == 16  # the cells train what the override says
    with pytest.raises(ValueError, match=r"experiment C12: --set 'readings=\[\]': C12Config has no key 'readings'"):
        plan_experiments(["C8", "C12"], "quick", None, overrides=("readings=[]",))


def test_cli_set_reaches_the_dry_run_and_an_old_flat_key_is_a_clear_error(capsys):
    assert main(["reproduce", "--only", "C8", "--dry-run", "--set", "train.batch_size=48"]) == 0
    assert "| batch_size | 48 |" in capsys.readouterr().out
    code = main(["reproduce", "--only", "C8", "--dry-run", "--set", "batch_size=48"])
    err = capsys.readouterr().err
    assert code != 0 and "it is train.batch_size now" in err
