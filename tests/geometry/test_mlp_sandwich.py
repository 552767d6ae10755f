"""The sandwich block path and declared loss curvature against dense float64 references.

References come from tests/geometry_reference.py (torch.autograd.functional, explicit loops)
and from Hessians written out in the test; nothing is shared with headgeom.geometry.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.loss_curvature import LowRankCurvature, curvature_for, pulled_columns
from headgeom.geometry.engine.sandwich import block_costs
from headgeom.objectives import AnalysisLoss, analysis_loss, negative_cosine

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N, D = 3, 4


def chain(widths: list[int], act, bn: bool = False, bias: bool = True, seed: int = 0) -> nn.Module:
    """Linear layers of the given widths with `act` (and eval BatchNorm) between them."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias))
        if i < len(widths) - 2:
            if bn:
                b = nn.BatchNorm1d(widths[i + 1])
                b.running_mean.uniform_(-0.5, 0.5)
                b.running_var.uniform_(0.5, 2.0)
                b.weight.data.uniform_(0.5, 1.5)
                b.bias.data.uniform_(-0.3, 0.3)
                layers.append(b)
            if act is not None:
                layers.append(act())
    return nn.Sequential(*layers).to(DT).eval()


HEADS = {
    "linear": lambda: chain([D, 6, 5], None),
    "silu-1": lambda: chain([D, 7, 5], nn.SiLU),
    "gelu-2-bn": lambda: chain([D, 6, 3, 5], nn.GELU, bn=True),
    "tanh-3-nobias": lambda: chain([D, 6, 6, 4, 5], nn.Tanh, bias=False),
    "softplus-bottleneck": lambda: chain([D, 8, 2, 6], lambda: nn.Softplus(beta=2.0)),
}


def losses(k: int):
    g = torch.Generator().manual_seed(3)
    target = torch.randn(N, k, generator=g, dtype=DT)
    return {
        "cosine-declared": analysis_loss("negative_cosine", target),
        "cosine-plain": lambda u: negative_cosine(u, target),
        "mse-declared": analysis_loss("mse", target),
    }


# every head under every reading, the three losses taking turns (dense references are slow)
CASES = [(h, r, ("cosine-declared", "cosine-plain", "mse-declared")[(2 * i + j) % 3])
         for i, h in enumerate(sorted(HEADS)) for j, r in enumerate(["ambient", "tangential"])]


@pytest.mark.parametrize("head_name,reading,loss_name", CASES)
def test_sandwich_blocks_match_dense_reference(head_name, reading, loss_name):
    head = HEADS[head_name]()
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(5), dtype=DT)
    k = head(z).shape[1]
    loss = losses(k)[loss_name]
    if True:
        eh = effective_hessian(head, loss, z, reading=reading, block_strategy="sandwich", chunk_size=2)
        h, g, m = eh.decomposed_blocks()
        assert eh.block_path().startswith("sandwich")
        ref_h, ref_g, ref_m = reference_parts(head, loss, z, reading)
        what = f"{head_name}/{loss_name}/{reading}"
        assert_close(g, diagonal_blocks(ref_g, N, D), what=what + " G")
        assert_close(m, diagonal_blocks(ref_m, N, D), what=what + " M")
        assert_close(h, diagonal_blocks(ref_h, N, D), what=what + " H")
        assert_close(eh.blocks(), h, rtol=1e-12, atol=1e-14, what=what + " blocks()")


def test_declared_curvature_is_used_only_when_declared():
    head = HEADS["silu-1"]()
    z = torch.randn(N, D, dtype=DT)
    ls = losses(5)
    declared = effective_hessian(head, ls["cosine-declared"], z, block_strategy="sandwich")
    declared.blocks()
    plain = effective_hessian(head, ls["cosine-plain"], z, block_strategy="sandwich")
    plain.blocks()
    hvp = effective_hessian(head, ls["cosine-plain"], z, block_strategy="sandwich", discover_structure=False)
    hvp.blocks()
    assert declared.block_path() == "sandwich+declared-curvature"
    assert plain.block_path() == "sandwich+discovered-curvature"  # headgeom.geometry.engine.loss_discovery
    assert hvp.block_path() == "sandwich+hvp"
    jac = effective_hessian(head, ls["cosine-plain"], z, block_strategy="jacobian")
    jac.blocks()
    assert jac.block_path() == "jacobian+discovered-curvature"
    assert jac.info()["block_strategy"] == "jacobian"


def test_negative_cosine_structure_equals_autograd_hessian():
    u = torch.randn(N, 6, dtype=DT)
    c = torch.randn(N, 6, dtype=DT)
    curv = curvature_for(analysis_loss("negative_cosine", c), u, "ambient")
    for i in range(N):
        # the per-sample loss −cos(u_i, c_i)/N, differentiated by torch.autograd.functional
        ref = hessian(lambda x: -torch.dot(x, c[i]) / (x.norm() * c[i].norm()) / N, u[i])
        block = curv.alpha[i] * torch.eye(6, dtype=DT) + curv.U[i] @ curv.B[i] @ curv.U[i].T
        assert_close(block, ref, rtol=1e-10, atol=1e-13, what=f"sample {i}")


def test_tangential_structure_is_projected_hessian():
    u = torch.randn(N, 5, dtype=DT)
    c = torch.randn(N, 5, dtype=DT)
    curv = curvature_for(analysis_loss("negative_cosine", c), u, "tangential")
    for i in range(N):
        ref = hessian(lambda x: -torch.dot(x, c[i]) / (x.norm() * c[i].norm()) / N, u[i])
        p = torch.eye(5, dtype=DT) - torch.outer(u[i], u[i]) / u[i].dot(u[i])
        block = curv.alpha[i] * torch.eye(5, dtype=DT) + curv.U[i] @ curv.B[i] @ curv.U[i].T
        assert_close(block, p @ ref @ p, rtol=1e-10, atol=1e-13, what=f"sample {i}")


def test_wrong_declaration_is_refused():
    c = torch.randn(N, 5, dtype=DT)

    loss = AnalysisLoss(lambda u: negative_cosine(u, c),
                        hessian_structure=lambda u: (torch.ones(u.shape[0], dtype=DT), None, None))  # wrong
    with pytest.raises(ValueError, match="declared hessian_structure disagrees"):
        curvature_for(loss, torch.randn(N, 5, dtype=DT), "ambient")
    assert curvature_for(lambda u: negative_cosine(u, c), torch.randn(N, 5, dtype=DT), "ambient") is None


def test_low_rank_sandwich_formula():
    g = torch.Generator().manual_seed(0)
    alpha = torch.randn(N, generator=g, dtype=DT)
    U = torch.randn(N, 7, 2, generator=g, dtype=DT)
    B = torch.randn(N, 2, 2, generator=g, dtype=DT)
    W = torch.randn(7, 4, generator=g, dtype=DT)
    curv = LowRankCurvature(alpha, U, B)
    got = curv.sandwich(W, W.T @ W, 7)
    for i in range(N):
        a = alpha[i] * torch.eye(7, dtype=DT) + U[i] @ B[i] @ U[i].T
        assert_close(got[i], W.T @ a @ W, rtol=1e-12, atol=1e-13)
    w = torch.randn(N, 7, generator=g, dtype=DT)
    ref = torch.stack([(alpha[i] * torch.eye(7, dtype=DT) + U[i] @ B[i] @ U[i].T) @ w[i] for i in range(N)])
    assert_close(curv.apply(w), ref, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("with_w", [True, False])
@pytest.mark.parametrize("zero_alpha", [True, False])
def test_low_rank_sandwich_with_a_diagonal(with_w, zero_alpha):
    # the DINO loss's form: diag(δ_i) + U_i B_i U_iᵀ with alpha = 0 (then no WᵀW is needed)
    g = torch.Generator().manual_seed(5)
    alpha = torch.zeros(N, dtype=DT) if zero_alpha else torch.randn(N, generator=g, dtype=DT)
    U = torch.randn(N, 7, 1, generator=g, dtype=DT)
    B = torch.randn(N, 1, 1, generator=g, dtype=DT)
    delta = torch.rand(N, 7, generator=g, dtype=DT)
    W = torch.randn(7, 4, generator=g, dtype=DT) if with_w else None
    curv = LowRankCurvature(alpha, U, B, delta)
    gram = None if (W is None or zero_alpha) else W.T @ W
    got = curv.sandwich(W, gram, 7)
    for i in range(N):
        a = alpha[i] * torch.eye(7, dtype=DT) + U[i] @ B[i] @ U[i].T + torch.diag(delta[i])
        assert_close(got[i], a if W is None else W.T @ a @ W, rtol=1e-12, atol=1e-13)
    if with_w and not zero_alpha:
        with pytest.raises(ValueError, match="needs gram"):
            curv.sandwich(W, None, 7)


def test_pulled_columns_are_w_transpose_times_each_samples_columns():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(9, 4, generator=g, dtype=DT)
    u = torch.randn(N, 9, 3, generator=g, dtype=DT)
    got = pulled_columns(w, u)
    assert got.shape == (N, 4, 3)
    for i in range(N):
        assert_close(got[i], w.T @ u[i], rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("with_w", [True, False])
@pytest.mark.parametrize("zero_alpha", [True, False])
@pytest.mark.parametrize("with_diag", [True, False])
@pytest.mark.parametrize("with_u", [True, False])
def test_low_rank_sandwich_scaled_on_both_sides_into_a_buffer(with_w, zero_alpha, with_diag, with_u):
    # S_i Wᵀ A_i W S_i written into a given (dirty) buffer: the sandwich's middle factor D K D
    g = torch.Generator().manual_seed(11)
    k, m = 7, 4
    alpha = torch.zeros(N, dtype=DT) if zero_alpha else torch.randn(N, generator=g, dtype=DT)
    U = torch.randn(N, k, 2, generator=g, dtype=DT) if with_u else None
    B = torch.randn(N, 2, 2, generator=g, dtype=DT) if with_u else None
    delta = torch.rand(N, k, generator=g, dtype=DT) if with_diag else None
    W = torch.randn(k, m, generator=g, dtype=DT) if with_w else None
    width = m if with_w else k
    scale = torch.randn(N, width, generator=g, dtype=DT)
    curv = LowRankCurvature(alpha, U, B, delta)
    gram = None if (W is None or zero_alpha) else W.T @ W
    out = torch.full((N, width, width), float("nan"), dtype=DT)
    got = curv.sandwich(W, gram, k, scale=scale, out=out, wt=None if W is None else W.T.contiguous())
    assert got.data_ptr() == out.data_ptr()
    for i in range(N):
        a = alpha[i] * torch.eye(k, dtype=DT)
        if with_u:
            a = a + U[i] @ B[i] @ U[i].T
        if with_diag:
            a = a + torch.diag(delta[i])
        kw = a if W is None else W.T @ a @ W
        ref = torch.diag(scale[i]) @ kw @ torch.diag(scale[i])
        assert_close(got[i], ref, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("chunk_size", [1, 2, 32])
def test_engine_blocks_over_chunks(chunk_size):
    # chunks of 1 and 2 of 3 samples: the reused buffers see a short last chunk
    head = HEADS["tanh-3-nobias"]()
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(4))
    loss = losses(5)["cosine-declared"]
    h_ref, g_ref, m_ref = reference_parts(head, loss, z)
    eh = effective_hessian(head, loss, z, block_strategy="sandwich", chunk_size=chunk_size)
    assert_close(eh.blocks(), diagonal_blocks(h_ref, N, D), what="blocks")
    assert_close(eh.interaction_blocks(), diagonal_blocks(m_ref, N, D), what="M blocks")
    assert_close(eh.gauss_newton_blocks(), diagonal_blocks(g_ref, N, D), what="G blocks")


def test_auto_strategy_follows_the_flop_count():
    # a bottleneck before a wide output: the sandwich at width 2 is far cheaper
    narrow = chain([D, 8, 2, 16], nn.SiLU)
    z = torch.randn(N, D, dtype=DT)
    c = torch.randn(N, 16, dtype=DT)
    # discovery off: an undeclared loss costs HVPs, as the FLOP count below assumes
    eh = effective_hessian(narrow, lambda u: negative_cosine(u, c), z, discover_structure=False)
    eh.blocks()
    costs = block_costs(eh.structured_layers, D, 16, False)
    assert costs["sandwich"] < costs["jacobian"] and eh.block_path() == "sandwich+hvp"
    # last hidden layer much wider than z and the output, no declared curvature: J is cheaper
    wide = chain([2, 64, 3], nn.SiLU)
    z2 = torch.randn(N, 2, dtype=DT)
    c2 = torch.randn(N, 3, dtype=DT)
    eh2 = effective_hessian(wide, lambda u: negative_cosine(u, c2), z2, discover_structure=False)
    eh2.blocks()
    costs2 = block_costs(eh2.structured_layers, 2, 3, False)
    assert costs2["sandwich"] > costs2["jacobian"] and eh2.block_path() == "jacobian"


def test_auto_strategy_counts_a_declared_diagonal():
    # the DINO loss declares diag(p_i)/(N T²) - p_i p_iᵀ/(N T²): on the sandwich path W_Lᵀ diag W_L
    # costs k·m²; at m = k = 32 over d = 2 that makes the Jacobian path the cheaper one
    head = chain([2, 32, 32], nn.SiLU)
    z = torch.randn(N, 2, dtype=DT, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        teacher = head(z + 0.1)
    loss = analysis_loss("dino", teacher)
    eh = effective_hessian(head, loss, z)
    layers = eh.structured_layers
    without = block_costs(layers, 2, 32, True)
    with_diag = block_costs(layers, 2, 32, True, diagonal=True)
    assert without["sandwich"] <= without["jacobian"] < with_diag["sandwich"]  # (a tie takes the sandwich)
    assert eh.block_path() == "jacobian+declared-curvature"
    h_ref, _, _ = reference_parts(head, loss, z)
    assert_close(eh.blocks(), diagonal_blocks(h_ref, N, 2), what="blocks")


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="block_strategy"):
        effective_hessian(HEADS["linear"](), lambda u: u.sum(), torch.randn(N, D, dtype=DT), block_strategy="fast")


def test_simsiam_and_byol_geometry_losses_declare_their_curvature():
    head = HEADS["gelu-2-bn"]()
    z = torch.randn(N, D, dtype=DT)
    target = torch.randn(N, 5, dtype=torch.float32)  # a float32 training target, analysed in float64
    for scale, shift in ((0.5, 0.0), (2.0, 2.0)):  # SimSiam's and BYOL's geometry losses
        loss = analysis_loss("negative_cosine", target).scaled(scale, shift)
        eh = effective_hessian(head, loss, z)
        h = eh.blocks()
        assert eh.block_path() == "sandwich+declared-curvature"
        ref_h, _, _ = reference_parts(head, loss, z, "ambient")
        assert_close(h, diagonal_blocks(ref_h, N, D), what=f"scale {scale}")


def test_unfolded_linear_tail_after_the_last_activation():
    # 5 -> 2 -> 6 after the last activation is not folded (a bottleneck): the tail is two Linears
    head = nn.Sequential(nn.Linear(D, 7), nn.SiLU(), nn.Linear(7, 5), nn.Linear(5, 2), nn.Linear(2, 6)).to(DT).eval()
    linear = nn.Sequential(nn.Linear(D, 3, bias=False), nn.Linear(3, 2, bias=False), nn.Linear(2, 5, bias=False)).to(DT)
    z = torch.randn(N, D, dtype=DT)
    for h in (head, linear):
        k = h(z).shape[1]
        loss = losses(k)["cosine-declared"]
        eh = effective_hessian(h, loss, z, block_strategy="sandwich")
        got_h, got_g, got_m = eh.decomposed_blocks()
        ref_h, ref_g, ref_m = reference_parts(h, loss, z, "ambient")
        assert sum(isinstance(m, nn.Linear) for m in eh.structured_layers) >= 2
        assert_close(got_g, diagonal_blocks(ref_g, N, D), what="G")
        assert_close(got_m, diagonal_blocks(ref_m, N, D), what="M")
        assert_close(eh.blocks(), diagonal_blocks(ref_h, N, D), what="H")
