"""Registry contents and every error path of the objectives (messages name the values seen)."""
import dataclasses
import re

import pytest
import torch

from headgeom.objectives import (
    OBJECTIVES, ObjectiveSpec, analysis_loss, barlow_twins, dino, get_objective, info_nce, mocov3,
    mse_to_target, negative_cosine, nt_xent, simsiam_loss, vicreg,
)

DT = torch.float64
NAMES = {"mse", "negative_cosine", "nt_xent", "info_nce", "vicreg", "barlow_twins", "dino", "mocov3"}
BATCH_LOSSES = {"vicreg": vicreg, "barlow_twins": barlow_twins, "nt_xent": nt_xent, "info_nce": info_nce}
NEEDS_TWO = {**BATCH_LOSSES, "mocov3": mocov3}  # in-batch negatives or batch statistics: N >= 2
PAIR_LOSSES = {**NEEDS_TWO, "mse": mse_to_target, "negative_cosine": negative_cosine}
# the closed forms of each objective's loss Hessian: (low-rank per-sample blocks, diagonal blocks)
DECLARED = {"mse": (True, False), "negative_cosine": (True, False), "nt_xent": (False, True),
            "info_nce": (False, False), "vicreg": (False, True), "barlow_twins": (False, True),
            "dino": (True, False), "mocov3": (True, True)}


def x(*shape):
    return torch.randn(*shape, dtype=DT)


def test_registry_names_and_flags():
    assert set(OBJECTIVES) == NAMES
    for name, spec in OBJECTIVES.items():
        assert isinstance(spec, ObjectiveSpec) and spec.name == name and spec.description
        assert get_objective(name) is spec
    assert {n for n, s in OBJECTIVES.items() if s.cosine} == {"negative_cosine"}
    assert {n for n, s in OBJECTIVES.items() if s.batch_coupled} == set(BATCH_LOSSES)
    assert {n for n, s in OBJECTIVES.items() if s.two_view} == set(BATCH_LOSSES)
    assert OBJECTIVES["dino"].fn is dino and OBJECTIVES["mse"].fn is mse_to_target
    with pytest.raises(dataclasses.FrozenInstanceError):
        OBJECTIVES["mse"].cosine = True


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_spec_carries_the_closed_forms_and_analysis_loss_declares_them(name):
    spec = OBJECTIVES[name]
    structure, blocks = DECLARED[name]
    assert (spec.hessian_structure is not None, spec.diagonal_blocks is not None) == (structure, blocks)
    loss = analysis_loss(name, x(4, 6))
    assert (loss.hessian_structure is not None, loss.diagonal_blocks is not None) == (structure, blocks)


def test_unknown_objective_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown objective 'simclr'.*barlow_twins.*vicreg"):
        get_objective("simclr")
    with pytest.raises(ValueError, match="unknown objective"):
        analysis_loss("simclr", x(4, 3))


def test_analysis_loss_rejects_unknown_kwargs_and_non_tensors():
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['temp'\].*temperature"):
        analysis_loss("nt_xent", x(4, 3), temp=0.1)
    with pytest.raises(TypeError, match=r"\['temperature'\].*center"):
        analysis_loss("dino", x(4, 3), temperature=0.1)
    with pytest.raises(TypeError, match="other must be a torch.Tensor"):
        analysis_loss("mse", [[1.0, 2.0]])


@pytest.mark.parametrize("name", sorted(NEEDS_TWO))
def test_batch_of_one_raises(name):
    with pytest.raises(ValueError, match=rf"{name}.*at least 2.*got batch size 1"):
        NEEDS_TWO[name](x(1, 3), x(1, 3))
    with pytest.raises(ValueError, match="got batch size 1"):
        analysis_loss(name, x(1, 3))(x(1, 3))


@pytest.mark.parametrize("name", sorted(PAIR_LOSSES))
def test_mismatched_shapes_name_both(name):
    with pytest.raises(ValueError, match=r"same shape.*\(4, 3\).*\(4, 5\)"):
        PAIR_LOSSES[name](x(4, 3), x(4, 5))
    with pytest.raises(ValueError, match=r"\(5, 3\).*\(4, 3\)"):
        PAIR_LOSSES[name](x(5, 3), x(4, 3))


@pytest.mark.parametrize("name", sorted(PAIR_LOSSES))
@pytest.mark.parametrize("shape", [(12,), (2, 3, 4)])
def test_non_2d_inputs_raise(name, shape):
    with pytest.raises(ValueError, match="must be 2-D.*" + re.escape(str(shape))):
        PAIR_LOSSES[name](x(*shape), x(*shape))


def test_non_tensor_and_integer_inputs_raise_type_error():
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        vicreg([[1.0, 2.0], [3.0, 4.0]], x(2, 2))
    with pytest.raises(TypeError, match="floating-point"):
        mse_to_target(torch.ones(3, 2, dtype=torch.long), torch.ones(3, 2, dtype=torch.long))


@pytest.mark.parametrize("t", [0.0, -0.1, float("inf"), float("nan")])
def test_bad_temperatures_raise(t):
    a, b = x(4, 3), x(4, 3)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        nt_xent(a, b, temperature=t)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        info_nce(a, b, temperature=t)
    with pytest.raises(ValueError, match="student_temp must be"):
        dino([a, b], [a, b], student_temp=t)
    with pytest.raises(ValueError, match="teacher_temp must be"):
        dino([a, b], [a, b], teacher_temp=t)
    with pytest.raises(ValueError, match="student_temp must be"):
        analysis_loss("dino", b, student_temp=t)(a)


def test_negative_coefficients_and_eps_raise():
    a, b = x(4, 3), x(4, 3)
    with pytest.raises(ValueError, match="eps must be a finite number >= 0; got -1"):
        vicreg(a, b, eps=-1.0)
    with pytest.raises(ValueError, match="cov_coeff"):
        vicreg(a, b, cov_coeff=-1.0)
    with pytest.raises(ValueError, match="lambd"):
        barlow_twins(a, b, lambd=-0.1)


def test_simsiam_checks_each_pair():
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4, 2\)"):
        simsiam_loss(x(4, 3), x(4, 3), x(4, 3), x(4, 2))


def test_dino_view_errors():
    v = x(4, 5)
    with pytest.raises(ValueError, match=r"student\[1\] \(4, 6\) and student\[0\] \(4, 5\)"):
        dino([v, x(4, 6)], [v, v])
    with pytest.raises(ValueError, match=r"teacher\[0\] \(3, 5\)"):
        dino([v, v], [x(3, 5)])
    with pytest.raises(ValueError, match=r"must be 2-D.*\(20,\)"):
        dino([v, x(20)], [v])
    with pytest.raises(ValueError, match=r"stacked views \(V, N, K\); got shape \(4, 5\)"):
        dino(v, [v])
    with pytest.raises(ValueError, match="at least one view"):
        dino([], [v])
    with pytest.raises(ValueError, match="at least one .* pair"):
        dino([v], [v])
    with pytest.raises(ValueError, match="at least the teacher's 3 global views; got 2"):
        dino([v, v], [v, v, v])
    with pytest.raises(ValueError, match=r"center must have shape \(1, 5\) or \(5,\).*\(1, 4\)"):
        dino([v, v], [v, v], center=x(1, 4))
    with pytest.raises(TypeError, match="sequence of"):
        dino({"a": v}, [v])
    with pytest.raises(ValueError, match=r"student \(4, 5\) and teacher \(4, 6\)"):
        analysis_loss("dino", x(4, 6))(v)


@pytest.mark.parametrize("name", ["nt_xent", "vicreg", "barlow_twins", "mocov3"])
def test_diagonal_blocks_refuse_what_their_loss_refuses(name):
    """Each closed-form block function checks its inputs as its loss does (same messages)."""
    spec = OBJECTIVES[name]
    bad = {"nt_xent": {"temperature": 0.0}, "vicreg": {"cov_coeff": -1.0}, "barlow_twins": {"lambd": -0.1},
           "mocov3": {"temperature": -1.0}}[name]
    loss, blocks = spec.fn, spec.diagonal_blocks
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    for args, kwargs in (((a, b), bad), ((a, b[:, :2]), {}), ((a[:1], b[:1]), {})):
        with pytest.raises(ValueError) as from_loss:
            loss(*args, **kwargs)
        with pytest.raises(ValueError, match=re.escape(str(from_loss.value))):
            blocks(*args, **kwargs)
