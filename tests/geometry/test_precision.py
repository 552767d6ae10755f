"""float32 analysis: its measured error against float64 (info()["precision"]) bounds the blocks'.

References: dense float64 H_eff from tests/geometry_reference.py (torch.autograd.functional).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.objectives import analysis_loss, negative_cosine, vicreg

from geometry_reference import diagonal_blocks, reference_parts

DT = torch.float64
N, D, W, K = 4, 5, 12, 6
ACTS = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU, "tanh": nn.Tanh}


def make_head(act: str, bn: str = "none") -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(D, W)] + ([nn.BatchNorm1d(W)] if bn != "none" else []) + \
             [ACTS[act](), nn.Linear(W, W), nn.Linear(W, W), ACTS[act](), nn.Linear(W, K)]  # a foldable pair
    head = nn.Sequential(*layers)  # float32, as trained
    return head.train(bn == "train")


def problem(loss_name: str):
    g = torch.Generator().manual_seed(1)
    z = torch.randn(N, D, dtype=DT, generator=g)
    target = torch.randn(N, K, dtype=DT, generator=g)
    loss = {"cosine-declared": analysis_loss("negative_cosine", target),
            "cosine-plain": lambda u: negative_cosine(u, target.to(u.dtype)),
            "vicreg": lambda u: vicreg(u, target.to(u.dtype))}[loss_name]
    return z, loss


def rel_fro(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).norm() / b.norm())


@pytest.mark.parametrize("loss_name", ["cosine-declared", "cosine-plain", "vicreg"])
@pytest.mark.parametrize("act,bn", [("relu", "none"), ("silu", "eval"), ("gelu", "none"), ("tanh", "train")])
def test_float32_blocks_are_within_the_reported_bound(act, bn, loss_name):
    head = make_head(act, bn)
    z, loss = problem(loss_name)
    eh = effective_hessian(head, loss, z, dtype=torch.float32)
    h, g, m = eh.decomposed_blocks()
    assert h.dtype == torch.float32
    info = eh.info()
    assert info["dtype"] == "float32"
    prec = info["precision"]
    assert prec["measured"], prec
    assert 0 < prec["Hv"] < 1e-4 and prec["u"] < 1e-4  # float32 rounding, not a wrong result
    h_ref, g_ref, m_ref = reference_parts(head.double(), lambda u: loss(u), z)
    for name, got, ref in (("H", h, h_ref), ("G", g, g_ref), ("M", m, m_ref)):
        ref_blocks = diagonal_blocks(ref, N, D)
        if ref_blocks.norm() > 0:
            err = rel_fro(got, ref_blocks)
            assert err <= prec["bound"], f"{name}: float32 error {err:.2e} above the reported bound {prec['bound']:.2e}"


def test_float32_takes_the_structured_path_of_a_folded_chain():
    """Folding two Linears reassociates products: the chain check must allow float32 rounding."""
    z, loss = problem("cosine-declared")
    eh = effective_hessian(make_head("silu"), loss, z, dtype=torch.float32)
    assert eh.structured and len(eh.structured_layers) < len(make_head("silu"))


def test_float64_analysis_reports_no_precision_record():
    z, loss = problem("cosine-declared")
    assert "precision" not in effective_hessian(make_head("relu"), loss, z).info()


def test_a_reference_that_cannot_run_in_float64_is_reported_not_measured():
    z, _ = problem("cosine-declared")
    w = torch.randn(D, K)  # a callable head with float32 weights: float64 z cannot go through it
    eh = effective_hessian(lambda x: torch.tanh(x @ w), lambda u: u.pow(2).mean(), z.float(), dtype=torch.float32)
    prec = eh.info()["precision"]
    assert prec["measured"] is False and "float64 reference failed" in prec["why"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (benchmarks/gpu_checks.sh runs it)")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_engine_on_cuda_matches_the_cpu_reference(dtype):
    head = make_head("silu", "eval")
    z, _ = problem("cosine-plain")
    target = torch.randn(N, K, dtype=DT, generator=torch.Generator().manual_seed(2))
    on_cuda = target.cuda()
    eh = effective_hessian(head.cuda(), lambda u: negative_cosine(u, on_cuda.to(u.dtype)), z.cuda(), dtype=dtype)
    h, _, m = eh.decomposed_blocks()
    assert h.device.type == "cuda"
    tol = 1e-10 if dtype == torch.float64 else eh.info()["precision"]["bound"]
    h_ref, _, m_ref = reference_parts(head.cpu().double(), lambda u: negative_cosine(u, target), z)
    assert rel_fro(h.cpu(), diagonal_blocks(h_ref, N, D)) <= tol
    assert rel_fro(m.cpu(), diagonal_blocks(m_ref, N, D)) <= tol
