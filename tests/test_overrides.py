"""``--set KEY=VALUE`` overrides (headgeom.overrides): nested keys reach the nested TrainConfig, unknown
keys and the old flat names of the training recipe fail with a message naming the key to write."""
import dataclasses

import pytest

from headgeom.cli import main
from headgeom.experiments.c8_hessian_tracking import C8Config
from headgeom.experiments.c12_guillotine import C12Config
from headgeom.experiments.runner import plan_experiments
from headgeom.overrides import apply_overrides, cells_ignoring, parse_assignment


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


# ----------------------------------------------------------------------------- keys the cells set themselves
TRAINING = ("ABLATION", "C8", "C9", "C11", "C12", "GRID")


def test_grid_refuses_train_lr_and_names_the_key_to_set_instead(capsys):
    with pytest.raises(ValueError, match=r"experiment GRID: --set 'train.lr=0.1': every cell sets train.lr itself, "
                                         r"so this value would be ignored; .*set runs instead"):
        plan_experiments(["GRID"], "quick", None, overrides=("train.lr=0.1",))
    code = main(["reproduce", "--only", "GRID", "--dry-run", "--set", "train.lr=0.1"])
    assert code != 0 and "train.lr" in capsys.readouterr().err
    # what the message says to do works: the runs' own lr reaches the cells
    plan, _ = plan_experiments(["GRID"], "quick", None, overrides=('runs=[["relu", false, 0.1]]',))
    exp, config, cells, *_ = plan[0]
    assert [exp.train_config(config, c).lr for c in cells] == [0.1]


@pytest.mark.parametrize("key, instead", [("system.bn=true", "set bn instead"),
                                          ("system.activation=relu", "set heads instead")])
def test_c5_refuses_the_system_fields_its_cells_set(key, instead):
    with pytest.raises(ValueError, match=rf"experiment C5: --set '{key}': every cell sets .* itself.*{instead}"):
        plan_experiments(["C5"], "quick", None, overrides=(key,))
    # what the message says to do works: the heads and bn set reach the cells
    plan, _ = plan_experiments(["C5"], "quick", None, overrides=('heads=["relu"]', "bn=[true]"))
    assert {(c["head"], c["bn"]) for c in plan[0][2]} == {("relu", True)}


@pytest.mark.parametrize("exp_id", TRAINING)
@pytest.mark.parametrize("key, instead", [("train.seed=0", "--seeds N"), ("train.head=d-8-8", "hidden, out_dim")])
def test_every_training_experiment_refuses_the_head_and_seed_its_cells_build(exp_id, key, instead):
    with pytest.raises(ValueError, match=rf"experiment {exp_id}: --set '{key}': every cell sets .*{instead}"):
        plan_experiments([exp_id], "quick", None, overrides=(key,))


@pytest.mark.parametrize("exp_id", ["C6", "C7"])
def test_the_invariance_experiments_refuse_the_backbone_training_their_regimes_set(exp_id):
    with pytest.raises(ValueError, match=rf"experiment {exp_id}: --set 'system.train_backbone=false': every cell "
                                         r"sets system.train_backbone itself.*choose the regimes instead"):
        plan_experiments([exp_id], "quick", None, overrides=("system.train_backbone=false",))


def test_a_train_field_every_cell_replaces_is_refused_and_one_some_cells_replace_is_noted():
    # C8's runs set the pseudo-collapse (0.1 for collapsed-silu, None for the normal and the offset runs)
    with pytest.raises(ValueError, match=r"experiment C8: --set 'train.pseudo_collapse=0.2': 8 of 8 cells set "
                                         r"train.pseudo_collapse themselves .*would be ignored; .*--dry-run"):
        plan_experiments(["C8"], "quick", None, overrides=("train.pseudo_collapse=0.2",))
    plan, _ = plan_experiments(["C8"], "quick", None, overrides=("train.pseudo_collapse=0.1",))
    *_, notes = plan[0]
    assert any("train.pseudo_collapse=0.1: 6 of 8 cells" in n and "does not reach them" in n for n in notes)
    # a field no cell replaces passes without a note
    plan, _ = plan_experiments(["C8"], "quick", None, overrides=("train.max_steps=7",))
    assert not plan[0][-1]


@dataclasses.dataclass(frozen=True)
class _Inner:
    a: int = 0
    b: int = 0


@dataclasses.dataclass(frozen=True)
class _Outer:
    inner: _Inner = _Inner()
    n: int = 1


def test_cells_ignoring_compares_every_cells_own_config_with_the_value_set():
    config = apply_overrides(_Outer(), ["inner.a=5", "inner.b=5"])
    every = [({"i": i}, _Inner(a=i, b=5)) for i in range(3)]  # a: each cell its own, b: kept
    with pytest.raises(ValueError, match=r"--set 'inner.a=5': 3 of 3 cells set inner.a themselves \(e.g. the cell "
                                         r"\{'i': 0\} runs a=0\), so 5 would be ignored; do this"):
        cells_ignoring(config, ["inner.a=5"], every, "do this")
    assert cells_ignoring(config, ["inner.b=5", "n=2"], every, "do this") == []
    some = [({"i": 0}, _Inner(a=5)), ({"i": 1}, _Inner(a=1))]
    assert cells_ignoring(config, ["inner.a=5"], some, "do this") == [
        "--set inner.a=5: 1 of 2 cells set inner.a themselves (e.g. the cell {'i': 1} runs a=1), so 5 does not "
        "reach them"]
    assert cells_ignoring(config, ["inner.a=5"], [], "do this") == []
    # declared keys are refused before anything is set, below a declared key too
    with pytest.raises(ValueError, match=r"--set 'inner.a=1': every cell sets inner itself.*set n"):
        apply_overrides(_Outer(), ["inner.a=1"], {"inner": "set n"})
