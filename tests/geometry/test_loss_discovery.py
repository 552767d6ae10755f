"""Structure discovery for losses that declare nothing, against dense float64 references.

References: tests/geometry_reference.py (torch.autograd.functional, explicit loops) and per-sample
Hessians by torch.autograd.functional.hessian written out here; nothing is shared with
headgeom.geometry. Tolerances: the dense reference's (rtol 1e-6, atol 1e-10) against it, and
1e-10 relative between the discovered and the declared path (round-off only).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.functional import hessian

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.loss_discovery import PROBES, discover_curvature, is_block_diagonal
from headgeom.geometry.engine.readings import loss_hvp
from headgeom.objectives import analysis_loss

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N, D = 4, 3
WIDE, NARROW = 2 * PROBES + 4, 2 * PROBES - 3  # k above 2p: low-rank branch; at most 2p: whole blocks


def mlp(d: int, k: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 7), nn.SiLU(), nn.Linear(7, 6), nn.Tanh(), nn.Linear(6, k)).to(DT).eval()


def plain_losses(k: int) -> dict:
    """Losses written as a user would, nothing declared; what discovery should find."""
    g = torch.Generator().manual_seed(3)
    c = torch.randn(N, k, generator=g, dtype=DT)
    a = torch.rand(k, generator=g, dtype=DT) + 0.5
    return {
        # α I + rank 2 per sample
        "cosine": (lambda u: -F.cosine_similarity(u, c).mean(), True),
        # α I + rank 3: cosine plus a scaled squared distance and a squared projection
        "cosine+mse": (lambda u: -F.cosine_similarity(u, c).mean() + 0.3 * (u - c).pow(2).sum(1).mean()
                       + 0.2 * (u @ a).pow(2).mean(), True),
        # full rank, not a scaled identity plus low rank: diag(p) − ppᵀ, and a diagonal of u²
        "softmax-ce": (lambda u: -(F.softmax(c, 1) * F.log_softmax(u, 1)).sum(1).mean(), False),
        "quartic": (lambda u: (a * u.pow(4)).sum(1).mean(), False),
    }


@pytest.mark.parametrize("k", [WIDE, NARROW])
@pytest.mark.parametrize("reading", ["ambient", "tangential"])
@pytest.mark.parametrize("name", ["cosine", "cosine+mse", "softmax-ce", "quartic"])
def test_blocks_of_undeclared_losses_match_dense_reference(name, reading, k):
    head = mlp(D, k)
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(5), dtype=DT)
    loss, low_rank = plain_losses(k)[name]
    eh = effective_hessian(head, loss, z, reading=reading, block_strategy="sandwich", chunk_size=3)
    h, g, m = eh.decomposed_blocks()
    ref_h, ref_g, ref_m = reference_parts(head, loss, z, reading)
    what = f"{name}/{reading}/k={k}"
    assert_close(g, diagonal_blocks(ref_g, N, D), what=what + " G")
    assert_close(m, diagonal_blocks(ref_m, N, D), what=what + " M")
    assert_close(h, diagonal_blocks(ref_h, N, D), what=what + " H")
    assert_close(eh.blocks(), h, rtol=1e-12, atol=1e-14, what=what + " blocks()")
    if low_rank or k <= 2 * PROBES:
        expected = "sandwich+discovered-curvature"
    else:  # full rank at k > 2p: discovery refuses and the HVP path runs
        expected = "sandwich+hvp"
    assert eh.block_path() == expected, what


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
def test_plain_lambda_negative_cosine_equals_the_declared_loss(reading):
    n, d, k = 6, 5, 16
    torch.manual_seed(1)
    head = nn.Sequential(nn.Linear(d, 24), nn.SiLU(), nn.Linear(24, 20), nn.SiLU(), nn.Linear(20, k)).to(DT).eval()
    z = torch.randn(n, d, dtype=DT)
    target = torch.randn(n, k, dtype=DT)
    declared = effective_hessian(head, analysis_loss("negative_cosine", target), z, reading=reading)
    plain = effective_hessian(head, lambda u: -F.cosine_similarity(u, target).mean(), z, reading=reading)
    for got, want, part in zip(plain.decomposed_blocks(), declared.decomposed_blocks(), "HGM"):
        scale = float(want.abs().max())
        assert_close(got, want, rtol=1e-10, atol=1e-12 * scale, what=f"{part} plain vs declared")
    assert_close(plain.blocks(), declared.blocks(), rtol=1e-10, atol=1e-12, what="blocks()")
    assert declared.block_path() == "sandwich+declared-curvature"
    assert plain.block_path() == "sandwich+discovered-curvature"


def per_sample_hessians(loss, u: torch.Tensor) -> torch.Tensor:
    """[∇²_u L]_ii (N, k, k) from the full dense Hessian."""
    n, k = u.shape
    full = hessian(lambda v: loss(v.reshape(n, k)), u.reshape(-1)).reshape(n, k, n, k)
    return torch.stack([full[i, :, i, :] for i in range(n)])


@pytest.mark.parametrize("k", [WIDE, NARROW])
def test_discovered_blocks_are_the_exact_per_sample_hessians(k):
    u = torch.randn(N, k, generator=torch.Generator().manual_seed(7), dtype=DT)
    for name, (loss, low_rank) in plain_losses(k).items():
        curv = discover_curvature(loss_hvp(loss, u), u)
        if not low_rank and k > 2 * PROBES:
            assert curv is None, name  # full rank: refused, never approximated
            continue
        ref = per_sample_hessians(loss, u)
        assert_close(curv.sandwich(None, None, k), ref, rtol=1e-10, atol=1e-13 * float(ref.abs().max()), what=name)


def test_a_low_rank_part_above_the_probe_count_is_refused():
    k = 2 * PROBES + 6
    g = torch.Generator().manual_seed(4)
    a = torch.randn(PROBES + 1, k, generator=g, dtype=DT)  # rank PROBES + 1 on top of the identity

    def loss(u):
        return 0.5 * u.pow(2).sum() + (u @ a.T).pow(2).sum()

    u = torch.randn(N, k, generator=g, dtype=DT)
    assert discover_curvature(loss_hvp(loss, u), u) is None
    assert discover_curvature(loss_hvp(loss, u), u, probes=PROBES + 1) is not None


@pytest.mark.parametrize("n", [2, 5, 8])
def test_every_coupled_pair_of_rows_is_detected(n):
    k = 3
    u = torch.randn(n, k, generator=torch.Generator().manual_seed(n), dtype=DT)
    separable = lambda v: v.pow(3).sum() + v.pow(2).sum(1).sqrt().sum()  # noqa: E731
    assert is_block_diagonal(loss_hvp(separable, u), u)
    for i in range(n):
        for j in range(i + 1, n):
            def coupled(v, i=i, j=j):
                return separable(v) + 0.1 * (v[i] * v[j]).sum()

            assert not is_block_diagonal(loss_hvp(coupled, u), u), (i, j)


def test_a_loss_coupled_away_from_row_zero_is_not_taken_for_separable():
    """Rows 1..N-1 interact, row 0 does not: a tangent on row 0 alone stays on row 0, so a probe
    of row 0 would call the loss separable. The blocks must still be exact."""
    k = WIDE
    head = mlp(D, k, seed=2)
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(6), dtype=DT)
    c = torch.randn(N, k, generator=torch.Generator().manual_seed(8), dtype=DT)

    def loss(u):
        return -F.cosine_similarity(u, c).mean() + 0.05 * u[1:].sum(0).pow(2).sum()

    eh = effective_hessian(head, loss, z)
    assert not eh.separable_loss
    h, g, m = eh.decomposed_blocks()
    ref_h, ref_g, ref_m = reference_parts(head, loss, z)
    assert_close(g, diagonal_blocks(ref_g, N, D), what="G")
    assert_close(h, diagonal_blocks(ref_h, N, D), what="H")


def test_discovery_off_gives_the_same_blocks_through_hvps():
    head = mlp(D, WIDE, seed=3)
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(9), dtype=DT)
    loss, _ = plain_losses(WIDE)["cosine+mse"]
    on = effective_hessian(head, loss, z, block_strategy="sandwich")
    off = effective_hessian(head, loss, z, block_strategy="sandwich", discover_structure=False)
    assert_close(on.blocks(), off.blocks(), rtol=1e-10, atol=1e-14, what="discovered vs HVP")
    assert (on.block_path(), off.block_path()) == ("sandwich+discovered-curvature", "sandwich+hvp")


class Normed(nn.Module):
    """A head with LayerNorm, analysed by the Jacobian path (J_iᵀ per sample, then the loss side)."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, k))

    def forward(self, z):
        return self.net(z)


@pytest.mark.parametrize("which", ["declared", "plain"])
def test_jacobian_path_uses_declared_or_discovered_blocks_exactly(which):
    torch.manual_seed(4)
    k = WIDE
    head = Normed(D, k).to(DT).eval()
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(11), dtype=DT)
    c = torch.randn(N, k, generator=torch.Generator().manual_seed(12), dtype=DT)
    loss = analysis_loss("negative_cosine", c) if which == "declared" else (lambda u: -F.cosine_similarity(u, c).mean())
    eh = effective_hessian(head, loss, z, reading="tangential", block_strategy="jacobian")
    h, g, m = eh.decomposed_blocks()
    assert eh.block_path() == f"jacobian+{which if which == 'declared' else 'discovered'}-curvature"
    ref_h, ref_g, _ = reference_parts(head, loss, z, "tangential")
    assert_close(g, diagonal_blocks(ref_g, N, D), what="G")
    assert_close(h, diagonal_blocks(ref_h, N, D), what="H")
