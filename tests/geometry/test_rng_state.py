"""Calling headgeom.geometry leaves the caller's random stream as it was (docs/design.md, the engine section).

Every random draw of the engine (probes, declaration checks, Lanczos and power-iteration starts, the
``hessian`` command's head and z) comes from a local torch.Generator or a seed used locally; none
reseeds or draws from the global generator. Checked by the global state before and after each
public call, over every block path, and by the ``hessian`` report being the same whatever the
global stream was.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from headgeom.geometry import (HeadCache, augmentation_tangent, effective_hessian, fisher_rank, lanczos_extremes,
                               loss_hvp, spectrum)
from headgeom.geometry.cli import hessian_report
from headgeom.geometry.invariance.pullback_gram import pullback_gram
from headgeom.geometry.linalg.shifted_power import shifted_power_lambda_min
from headgeom.geometry.linalg.threshold import pullback_and_ratio
from headgeom.objectives import analysis_loss, negative_cosine, nt_xent

DT = torch.float64
N, D, K = 4, 5, 6


def _unchanged(call, what: str):
    """Run ``call()`` and assert the global CPU generator's state is the same after it."""
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    out = call()
    assert torch.equal(torch.random.get_rng_state(), before), f"{what} changed the global random state"
    return out


def _head(norm: str = "none", train_bn: bool = False) -> nn.Module:
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    layers = [nn.Linear(D, 8), nn.SiLU(), nn.Linear(8, 8)]
    if norm == "group":
        layers[1:1] = [nn.GroupNorm(2, 8)]
    if train_bn:
        layers[1:1] = [nn.BatchNorm1d(8)]
    head = nn.Sequential(*layers, nn.GLU(), nn.Linear(4, K)).to(DT)
    torch.random.set_rng_state(gen_state)
    return head.train(train_bn)


def _z_target():
    gen = torch.Generator().manual_seed(5)
    return torch.randn(N, D, generator=gen, dtype=DT), torch.randn(N, K, generator=gen, dtype=DT)


@pytest.mark.parametrize("case", ["declared", "plain-lambda", "coupled-loss", "train-bn", "callable", "float32",
                                  "group-norm-jacobian"])
def test_every_block_path_leaves_the_global_stream_alone(case):
    z, target = _z_target()
    head, loss, kw = _head(), analysis_loss("negative_cosine", target), {}
    if case == "plain-lambda":
        loss = lambda u: negative_cosine(u, target)  # noqa: E731  (discovered curvature: random probes)
    elif case == "coupled-loss":
        loss = lambda u: nt_xent(u, target)  # noqa: E731
    elif case == "train-bn":
        head = _head(train_bn=True)
    elif case == "callable":
        frozen = _head()
        head = lambda x: frozen(x)  # noqa: E731
    elif case == "float32":
        kw = {"dtype": torch.float32}
    elif case == "group-norm-jacobian":
        head, kw = _head("group"), {"block_strategy": "jacobian"}

    def calls():
        eh = effective_hessian(head, loss, z, cache=HeadCache(), **kw)
        eh.blocks(), eh.decomposed_blocks(), eh.gauss_newton_blocks(rows=2), eh.interaction_blocks(rows=[1])
        eh.info(), eh.operand_scale(), eh.block_path("G")
        v = torch.ones(N * D, dtype=eh.z.dtype)
        eh.matvec(v), eh.gauss_newton_matvec(v), eh.interaction_matvec(v)
        eh.dense(), eh.gauss_newton(), eh.interaction()
        return eh

    eh = _unchanged(calls, case)
    _unchanged(lambda: spectrum(eh.blocks(), scale=eh.operand_scale().value), f"{case}: spectrum of blocks")
    _unchanged(lambda: spectrum(eh.operator("H"), k=2), f"{case}: spectrum of the operator (Lanczos)")
    _unchanged(lambda: lanczos_extremes(eh.operator("G"), k=1), f"{case}: lanczos_extremes")


def test_the_linear_algebra_and_invariance_functions_leave_it_alone():
    z, target = _z_target()
    eh = effective_hessian(_head(), analysis_loss("negative_cosine", target), z)
    g, m = eh.gauss_newton_blocks(), eh.interaction_blocks()
    _unchanged(lambda: shifted_power_lambda_min(eh.matvec, (N, D), iterations=3), "shifted_power_lambda_min")
    _unchanged(lambda: pullback_and_ratio(g + 1e-3 * torch.eye(D, dtype=DT), m), "pullback_and_ratio")
    _unchanged(lambda: loss_hvp(lambda u: negative_cosine(u, target), eh.u)(eh.u), "loss_hvp")
    _unchanged(lambda: pullback_gram(_head())(z), "pullback_gram")
    _unchanged(lambda: fisher_rank(torch.ones(N, K, D, dtype=DT), 1e-6), "fisher_rank")
    images = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0), dtype=DT)
    _unchanged(lambda: augmentation_tangent(lambda x: x.mean(dim=(2, 3)), images, "brightness"), "augmentation_tangent")


def test_the_hessian_report_neither_reads_nor_moves_the_global_stream():
    first = _unchanged(lambda: hessian_report("5-8-6:silu", "negative_cosine", batch=3, seed=7), "hessian_report")
    torch.manual_seed(999)  # another global stream: the same report
    torch.rand(10)
    second = hessian_report("5-8-6:silu", "negative_cosine", batch=3, seed=7)
    assert first["spectra"] == second["spectra"] and first["rho_norm"] == second["rho_norm"]
    other = hessian_report("5-8-6:silu", "negative_cosine", batch=3, seed=8)
    assert other["rho_norm"] != first["rho_norm"]  # the seed is used
