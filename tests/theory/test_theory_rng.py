"""No global RNG side effects: calling headgeom's public theory functions, and the
other library functions that seed or draw, leaves torch's global random stream where it was; only
the run layer (a training run's setup, an experiment's cell) seeds it.

Two checks that can each fail: every such function is called here and torch.random.get_rng_state()
(and numpy's and python's) compared before and after, with the numbers checked against what
torch.manual_seed(seed) used to give (so results seeded that way do not change); and the source of
the library (outside the run layer and geometry/, whose own branch removes its reseeding) is read
for calls that seed the global generators or draw from them without a generator.
"""
from __future__ import annotations

import ast
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from headgeom.heads import HeadSpec, ProjectionHead
from headgeom.methods import build_method
from headgeom.orbits.controls import fresh_head
from headgeom.rng import own_generator, seeded
from headgeom.runs.trained import RunSettings
from headgeom.theory import collapse, collapse_threshold, curve_isotropy, dynamics, invariance, whitening
from headgeom.theory.curvature import random_slice_basis
from headgeom.theory.pseudo_collapse import gap_at_init

SRC = Path(__file__).resolve().parents[2] / "src" / "headgeom"
D64 = torch.float64


def states():
    return torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def assert_untouched(before):
    after = states()
    assert torch.equal(before[0], after[0]), "torch's global generator moved"
    assert np.array_equal(before[1], after[1]) and before[2] == after[2]


def tanh_head(d=2, k=5):
    with seeded(1):
        return nn.Sequential(nn.Linear(d, 7), nn.Tanh(), nn.Linear(7, k)).double()


TINY_INVARIANCE = invariance.InvarianceSpec(size=8, n_content=3, hidden=8, d=6, head_hidden=8, k=5, n_train=32,
                                            steps=2, batch=8)
TINY_SYSTEM = dynamics.SystemSpec(n=6, d=3, width=8, k=4, pred_width=6, init_spread=0.1)

CALLS = {
    "collapse.collapsed_equilibrium": lambda: collapse.collapsed_equilibrium(tanh_head(), torch.ones(2, dtype=D64), 4,
                                                                             "mse"),
    "collapse.pseudo_collapsed_point": lambda: collapse.pseudo_collapsed_point(
        tanh_head(), torch.ones(4, 2, dtype=D64), "negative_cosine"),
    "collapse_threshold.lambda_min_at": lambda: collapse_threshold.lambda_min_at(
        tanh_head(), torch.ones(2, dtype=D64), 4, "ambient", 1.0, seed=3, rel_floor=1e-10),
    "curvature.random_slice_basis": lambda: random_slice_basis(6, 2, torch.Generator().manual_seed(0)),
    "curve_isotropy.init_params": lambda: curve_isotropy.init_params(HeadSpec((3, 5, 4), activation="tanh"), 2),
    "curve_isotropy.head_from_params": lambda: curve_isotropy.head_from_params(
        HeadSpec((3, 5, 4), activation="tanh"), curve_isotropy.init_params(HeadSpec((3, 5, 4), activation="tanh"), 2)),
    "curve_isotropy.fourier_curve": lambda: curve_isotropy.fourier_curve(4, seed=1),
    "curve_isotropy.fixed_target": lambda: curve_isotropy.fixed_target(4, 1),
    "dynamics.build_system": lambda: dynamics.build_system(TINY_SYSTEM, 0),
    "invariance.build_models": lambda: invariance.build_models(TINY_INVARIANCE, 3),
    "invariance.train_invariance": lambda: invariance.train_invariance(TINY_INVARIANCE, 3),
    "pseudo_collapse.gap_at_init": lambda: gap_at_init(
        lambda: build_method("simsiam", "resnet18", head="d-8-4:relu:nobias", predictor="d-2-4:relu:nobias",
                             backbone_options={"width": 1 / 32}, pseudo_collapse=0.1), 0.1, 3, 5, ("ambient",)),
    "whitening.random_subspace": lambda: whitening.random_subspace(5, 2),
    "whitening.best_fit_isotropy": lambda: whitening.best_fit_isotropy(torch.diag(torch.tensor([2.0, 1.0, -1.0],
                                                                                              dtype=D64)), 2),
    "orbits.controls.fresh_head": lambda: fresh_head(built(lambda: ProjectionHead(HeadSpec((4, 6, 3)))), seed=2),
    "runs.trained.RunSettings.build_method under seeded": lambda: _fresh_method(),
}


def _fresh_method():
    from headgeom.runs.trained import TrainedRun

    settings = RunSettings(method="simclr", backbone="resnet18", backbone_options={"width": 1 / 32}, head="d-8-4")
    run = TrainedRun(settings, {}, built(settings.build_method), Path("none"), None, None)
    return run.fresh_method(4)


def built(make):
    """An input of a call, built without touching the global stream (the call is what is checked)."""
    with seeded(99):
        return make()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_call_leaves_the_global_random_streams_where_they_were(name):
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    before = states()
    CALLS[name]()
    assert_untouched(before)


def test_local_seeding_gives_what_torch_manual_seed_gave():
    """init_params, build_models, fresh_method, fresh_head and gap_at_init's method draw the numbers
    they drew after torch.manual_seed(seed), so results seeded that way are unchanged."""
    spec = HeadSpec((3, 5, 4), activation="tanh")
    torch.manual_seed(2)
    want = ProjectionHead(spec, dtype=D64)
    got = curve_isotropy.init_params(spec, 2)
    assert all(torch.equal(got[k], v) for k, v in curve_isotropy.params_of(want).items())
    torch.manual_seed(3)
    backbone = nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.SiLU(), nn.Linear(8, 6))
    bb, _ = invariance.build_models(TINY_INVARIANCE, 3)
    assert all(torch.equal(a, b) for a, b in zip(backbone.parameters(), bb.parameters()))
    torch.manual_seed(2)
    want_head = ProjectionHead(HeadSpec((4, 6, 3)))
    got_head = fresh_head(ProjectionHead(HeadSpec((4, 6, 3))), seed=2)
    assert all(torch.equal(a, b) for a, b in zip(want_head.parameters(), got_head.parameters()))
    settings = RunSettings(method="simclr", backbone="resnet18", backbone_options={"width": 1 / 32}, head="d-8-4")
    torch.manual_seed(4)
    fresh = settings.build_method()
    with seeded(4):
        again = settings.build_method()
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), again.state_dict().values()))


def test_seeded_restores_after_an_error_and_optional_generators_are_local():
    before = states()
    with pytest.raises(RuntimeError):
        with seeded(9):
            torch.randn(3)
            raise RuntimeError("inside")
    assert_untouched(before)
    with pytest.raises(TypeError, match="seed must be an int"):
        with seeded(1.5):
            pass
    a = torch.randn(4, generator=own_generator(None, 7))
    b = torch.randn(4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    g = torch.Generator().manual_seed(1)
    assert own_generator(g) is g
    with pytest.raises(TypeError, match="torch.Generator"):
        own_generator(3)


# ----------------------------------------------------------------------------- the source, read
GLOBAL_SEEDING = {("torch", "manual_seed"), ("torch", "seed"), ("torch.random", "manual_seed"),
                  ("torch.random", "seed"), ("torch.cuda", "manual_seed"), ("torch.cuda", "manual_seed_all"),
                  ("np.random", "seed"), ("numpy.random", "seed"), ("random", "seed")}
GLOBAL_DRAWS = {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson",
                "rand_like", "randn_like", "randint_like"}
# the run layer seeds a run: a training run's setup (and its resume, which restores a checkpoint's
# RNG state), an experiment's cells; headgeom/rng.py is the local seeding itself. geometry/ is
# restructured on another branch, which removes its reseeding (geometry/report.py) there.
RUN_LAYER = ("train/setup.py", "train/resume.py", "experiments/", "rng.py", "geometry/")


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def global_rng_calls(path: Path) -> list[str]:
    """``line: call`` for each call in ``path`` that seeds a global generator or draws from torch's /
    numpy's global one (a torch draw without ``generator=``, a numpy.random module function)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, name = dotted(node.func.value), node.func.attr
        if (owner, name) in GLOBAL_SEEDING:
            found.append(f"{node.lineno}: {owner}.{name}")
        elif owner == "torch" and name in GLOBAL_DRAWS and not any(k.arg == "generator" for k in node.keywords):
            found.append(f"{node.lineno}: torch.{name} without generator=")
        elif owner in ("np.random", "numpy.random") and name not in ("default_rng", "Generator", "get_state", "set_state"):
            found.append(f"{node.lineno}: {owner}.{name}")
    return found


def test_library_code_neither_seeds_nor_draws_from_the_global_generators():
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(RUN_LAYER):
            continue
        bad += [f"src/headgeom/{rel}:{hit}" for hit in global_rng_calls(path)]
    assert not bad, ("library code touching the global random generators (take a torch.Generator, or build "
                     "inside headgeom.rng.seeded):\n" + "\n".join(bad))


def test_the_source_reader_finds_each_kind(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch, random\nimport numpy as np\n"
                    "torch.manual_seed(0)\nnp.random.seed(1)\nrandom.seed(2)\n"
                    "torch.randn(3)\ntorch.randn(3, generator=g)\nnp.random.normal(size=3)\n"
                    "np.random.default_rng(0)\ntorch.cuda.manual_seed_all(1)\n")
    assert [h.split(":")[0] for h in global_rng_calls(path)] == ["3", "4", "5", "6", "8", "10"]
