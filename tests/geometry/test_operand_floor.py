"""The sign floor relative to G's operands (headgeom.geometry.engine.operand_scale, docs/paper.md §4 pitfall 2).

- A near-radial bias-free linear head h(z) = (a bᵀ + ε C) z under the negative cosine with
  cos(u_i, c_i) > 0, tangential reading, float64: M = 0 and the exact H_eff is PSD (the formula of
  tests/geometry/test_readings_loss.py), yet P_i J_i ≈ 0 makes the blocks tiny by cancellation. A floor relative
  to the result counts round-off as negative for some seeds; the operand floor counts none and still
  counts the true positive eigenvalues.
- S against an independent dense float64 computation (torch.autograd.functional: per-sample head
  Jacobians, the dense loss Hessian): S_ref ≤ S ≤ 1.1 · S_ref (the stated margin; power steps converge
  from below, so S may not fall below S_ref on these small problems).
- Genuine negative curvature is still negative under the operand floor; a scale that puts the floor
  above it makes it zero (so the scale is used).
- The tracker records the operand scale and the floor it used.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry import effective_hessian, spectrum
from headgeom.geometry.engine.loss_curvature import LowRankCurvature
from headgeom.geometry.engine.operand_scale import MARGIN, low_rank_norms
from headgeom.heads import head_from
from headgeom.objectives import analysis_loss, negative_cosine
from headgeom.tracking import GeometryTracker

DT = torch.float64
N, D, K = 8, 6, 5


def near_radial(seed: int, eps: float) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """Head z ↦ (a bᵀ + eps C) z, z with bᵀz > 0, targets c_i = u_i + 0.1 noise (cos > 0)."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(K, generator=g, dtype=DT), torch.randn(D, generator=g, dtype=DT)
    c_mat = torch.randn(K, D, generator=g, dtype=DT)
    head = nn.Linear(D, K, bias=False).to(DT)
    with torch.no_grad():
        head.weight.copy_(torch.outer(a, b) + eps * c_mat)
    z = torch.randn(N, D, generator=g, dtype=DT)
    z = z * torch.sign(z @ b)[:, None]
    with torch.no_grad():
        u = head(z)
    c = u + 0.1 * u.norm(dim=1, keepdim=True) * torch.randn(N, K, generator=g, dtype=DT) / K ** 0.5
    return head, z, c


def test_near_radial_linear_head_round_off_is_zero_under_the_operand_floor():
    result_negatives = 0
    for seed in range(4):
        head, z, c = near_radial(seed, 1e-5)
        u = head(z).detach()
        assert bool((torch.nn.functional.cosine_similarity(u, c, dim=1) > 0).all())
        eh = effective_hessian(head, analysis_loss("negative_cosine", c), z, reading="tangential")
        h, _, m = eh.decomposed_blocks()
        assert float(m.abs().max()) == 0.0  # a linear head: M = 0, H = G (PSD where cos > 0)
        h = 0.5 * (h + h.transpose(1, 2))
        s = eh.operand_scale().value
        assert s > 1e6 * float(torch.linalg.eigvalsh(h).abs().max())  # the blocks are tiny against their operands
        result = spectrum(h)
        operands = spectrum(h, scale=s)
        result_negatives += result.n_negative
        assert result.floor_relative_to == "result" and result.operand_scale is None
        assert operands.floor_relative_to == "operands" and operands.floor == pytest.approx(1e-10 * s)
        assert operands.n_negative == 0, f"seed {seed}: round-off counted negative, lambda_min {operands.lambda_min}"
        assert operands.n_positive > 0  # the true curvature (order eps² ≫ 1e-10·S) is still seen
    assert result_negatives > 0  # the result-relative floor does count round-off here: the test can fail


def test_blocks_tiny_by_cancellation_pass_the_symmetry_check_only_with_their_operand_scale():
    """Raw engine blocks, not symmetrised: their asymmetry is round-off of the operands (eps · S), far
    above 1e-8 · max|H|; spectrum refuses them without the scale and takes them with it, with the
    eigenvalues of their symmetric part. An asymmetry of the operands' own size is still refused."""
    head, z, c = near_radial(0, 1e-5)
    eh = effective_hessian(head, analysis_loss("negative_cosine", c), z, reading="tangential")
    h, g, m = eh.decomposed_blocks()
    s = eh.operand_scale().value
    with pytest.raises(ValueError, match="not symmetric"):
        spectrum(h)  # the result-relative check fails on round-off here: the scale is what lets it pass
    got = spectrum(h, decomposition={"G": g, "M": m}, scale=s)
    ref = torch.linalg.eigvalsh(0.5 * (h + h.transpose(1, 2)))
    assert got.lambda_max == pytest.approx(float(ref.max()), rel=1e-12)
    assert got.lambda_min == pytest.approx(float(ref.min()), rel=1e-12, abs=1e-12 * s)
    skew = h.clone()
    skew[:, 0, 1] += 1e-6 * s  # 1e-6 of the operands: not round-off
    with pytest.raises(ValueError, match=r"max\(max\|A\|, scale\)"):
        spectrum(skew, scale=s)


def _dense_scale(head: nn.Module, loss, z: torch.Tensor, *, whole_loss: bool = False,
                 whole_jacobian: bool = False) -> float:
    """max_i ‖A_i‖₂ ‖J_i‖₂² from dense float64 autograd (whole-matrix norms where asked)."""
    n, d = z.shape
    with torch.no_grad():
        u = head(z)
    k = u.shape[1]
    a = hessian(lambda v: loss(v.reshape(n, k)), u.reshape(-1)).reshape(n, k, n, k)
    if whole_loss:
        a_norm = torch.full((n,), float(torch.linalg.matrix_norm(a.reshape(n * k, n * k), 2)), dtype=DT)
    else:
        a_norm = torch.stack([torch.linalg.matrix_norm(a[i, :, i, :], 2) for i in range(n)])
    if whole_jacobian:
        jac = jacobian(lambda zf: head(zf.reshape(n, d)).reshape(-1), z.reshape(-1))
        j_norm = torch.full((n,), float(torch.linalg.matrix_norm(jac, 2)), dtype=DT)
    else:
        j_norm = torch.stack([torch.linalg.matrix_norm(jacobian(lambda zi: head(zi[None])[0], z[i]), 2)
                              for i in range(n)])
    return float((a_norm * j_norm ** 2).max())


def _problem(case: str):
    g = torch.Generator().manual_seed(7)
    z = torch.randn(N, D, generator=g, dtype=DT)
    torch.manual_seed(3)
    head = head_from(f"{D}-7-{K}:silu" + (":bn" if case == "coupled-head" else "")).to(DT)
    head.train(case == "coupled-head")
    c = torch.randn(N, K, generator=g, dtype=DT)
    if case == "declared":
        return head, analysis_loss("negative_cosine", c), z, {}
    if case == "plain":
        return head, (lambda u: -torch.nn.functional.cosine_similarity(u, c, dim=1).mean()), z, {}
    if case == "coupled-loss":
        return head, analysis_loss("nt_xent", c), z, {"whole_loss": True}
    return head, (lambda u: negative_cosine(u, c)), z, {"whole_jacobian": True}


@pytest.mark.parametrize("case", ["declared", "plain", "coupled-loss", "coupled-head"])
@pytest.mark.parametrize("reading", ["ambient", "tangential"])
def test_operand_scale_against_dense_autograd(case, reading):
    head, loss, z, how = _problem(case)
    eh = effective_hessian(head, loss, z, reading=reading)
    got = eh.operand_scale()
    ref = _dense_scale(head, loss, z, **how)  # ambient A_i whatever the reading
    assert ref > 0
    # stated: S in [S_ref, MARGIN · S_ref] (power steps from below, rounded up by the margin)
    assert ref * (1 - 1e-12) <= got.value <= MARGIN * ref * (1 + 1e-12), (case, got.record(), ref)
    assert got.steps["jacobian"] >= 1 and (got.steps["loss"] == 0) == (case == "declared")
    assert ("whole" in got.loss_how) == bool(how.get("whole_loss"))
    assert ("whole" in got.jacobian_how) == bool(how.get("whole_jacobian"))
    assert ("declared" in got.loss_how) == (case == "declared")


def test_low_rank_norms_against_dense_blocks():
    g = torch.Generator().manual_seed(11)
    n, k, r = 4, 6, 2
    alpha = torch.randn(n, generator=g, dtype=DT)
    u_mat = torch.randn(n, k, r, generator=g, dtype=DT)
    b = torch.randn(n, r, r, generator=g, dtype=DT)
    b = b + b.transpose(1, 2)
    diag = torch.randn(n, k, generator=g, dtype=DT)
    eye = torch.eye(k, dtype=DT)
    dense = alpha[:, None, None] * eye + u_mat @ b @ u_mat.transpose(1, 2)
    exact = torch.linalg.matrix_norm(dense, 2)
    assert torch.allclose(low_rank_norms(LowRankCurvature(alpha, u_mat, b), k), exact, rtol=1e-12)
    assert torch.allclose(low_rank_norms(LowRankCurvature(alpha), k), alpha.abs())
    with_diag = torch.linalg.matrix_norm(dense + torch.diag_embed(diag), 2)
    bound = low_rank_norms(LowRankCurvature(alpha, u_mat, b, diag), k)
    assert bool((bound >= with_diag * (1 - 1e-12)).all())  # a bound, stated as such


def test_genuine_negative_curvature_stays_negative():
    # a constructed block: λ_min / λ_max = -1e-6, operands 1e3 × larger than the result
    blocks = torch.diag_embed(torch.tensor([[1.0, -1e-6, 0.5], [0.3, 0.2, 0.1]], dtype=DT))
    kept = spectrum(blocks, scale=1e3)
    assert kept.n_negative == 1 and kept.floor_relative_to == "operands" and kept.floor == pytest.approx(1e-7)
    lost = spectrum(blocks, scale=1e5)  # floor 1e-5 > 1e-6: the scale is used
    assert lost.n_negative == 0 and lost.n_zero == 1
    assert spectrum(blocks, scale=1e-3).floor_relative_to == "result"
    with pytest.raises(ValueError, match="scale must be None or a finite float"):
        spectrum(blocks, scale=float("nan"))
    # a smooth head whose H_eff is indefinite: still negative with its own operand scale
    head, loss, z, _ = _problem("declared")
    eh = effective_hessian(head, loss, z, reading="tangential")
    h = eh.blocks()
    h = 0.5 * (h + h.transpose(1, 2))
    spec = spectrum(h, scale=eh.operand_scale().value)
    lam = torch.linalg.eigvalsh(h)
    assert float(lam.min()) < -1e-3 * float(lam.abs().max())  # genuinely indefinite
    assert spec.n_negative == int((lam < -1e-10 * max(float(lam.abs().max()), eh.operand_scale().value)).sum()) > 0


class _Method(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(8, 4))
        self.projector = head_from("4-5-3:silu")

    def forward(self, views):
        z = [self.backbone(v) for v in views]
        return {"loss": negative_cosine(self.projector(z[0]), self.projector(z[1])), "z": z, "logs": {}}

    def geometry_problem(self, z_views):
        target = self.projector(z_views[1]).detach()
        return self.projector, lambda u: negative_cosine(u, target.to(u.dtype))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_tracker_records_the_operand_scale_and_the_floor_it_used(reduction):
    g = torch.Generator().manual_seed(1)
    views = [torch.randn(6, 2, 2, 2, generator=g) for _ in range(2)]
    method = _Method()
    tracker = GeometryTracker(views, reading="tangential", reduction=reduction, updates=False)
    out = tracker(0, method)
    p = f"heff_tangential_{reduction}_"
    z1 = method.backbone(views[0]).detach().double()
    target = method.projector(method.backbone(views[1])).detach().double()
    head = method.projector
    ref = _dense_scale(head.double(), lambda u: negative_cosine(u, target), z1) * (6 if reduction == "sum" else 1)
    assert ref <= out[p + "operand_scale"] <= MARGIN * ref * (1 + 1e-12)
    lam_abs = max(abs(out[p + "lambda_min"]), abs(out[p + "lambda_max"]))
    assert out[p + "floor"] == pytest.approx(1e-10 * max(lam_abs, out[p + "operand_scale"]), rel=1e-12)
    meta = tracker.metadata()
    assert "max_i |A_i|_2 |J_i|_2^2" in meta["keys"][p + "operand_scale"]
    assert meta["last_call"]["operand_scale"]["value"] * (6 if reduction == "sum" else 1) == pytest.approx(
        out[p + "operand_scale"])
