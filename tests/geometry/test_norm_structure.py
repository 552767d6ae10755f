"""LayerNorm, L2-normalisation and weight-normed Linears on the structured block path.

References: torch.autograd.functional per row (the layer maps) and tests/geometry_reference.py
(dense float64 H_eff, G, M); neither shares code with headgeom.geometry.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian
from torch.nn.utils import weight_norm as legacy_weight_norm
from torch.nn.utils.parametrizations import weight_norm

from headgeom.geometry import effective_hessian, mlp_sandwich, mlp_structure
from headgeom.geometry.engine.loss_curvature import curvature_for
from headgeom.geometry.layers.row_norm import RowNorm, row_norm_pass
from headgeom.heads import L2Normalize, head_from
from headgeom.objectives import analysis_loss, dino_pair

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N = 3


def _ln_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm without affine, written out: (x − mean) / sqrt(biased var + eps)."""
    mu = x.mean()
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean() + eps)


def _l2_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.clamp(torch.sqrt((x * x).sum()), min=eps)


@pytest.mark.parametrize("kind", ["ln", "l2"])
def test_row_norm_derivatives_match_autograd(kind):
    eps = 1e-5 if kind == "ln" else 1e-3
    ref = _ln_reference if kind == "ln" else _l2_reference
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 7, generator=g, dtype=DT)
    x[3] *= 1e-4  # for l2: ‖x‖ < eps, the linear branch of F.normalize
    grad_out = torch.randn(4, 7, generator=g, dtype=DT)
    state = row_norm_pass(RowNorm(kind, eps), x)
    jt_in = torch.randn(4, 5, 7, generator=g, dtype=DT)  # a batch of transposed Jacobians (s, d, w)
    jg = state.backward(grad_out)
    for i in range(4):
        f = lambda r: ref(r, eps)  # noqa: E731
        jac = jacobian(f, x[i])
        sec = hessian(lambda r: (grad_out[i] * f(r)).sum(), x[i])
        assert_close(state.y[i], f(x[i]), rtol=1e-12, atol=1e-14, what=f"{kind} y row {i}")
        assert_close(state.dense_jacobian()[i], jac, rtol=1e-10, atol=1e-12, what=f"{kind} J row {i}")
        assert_close(jg[i], jac.T @ grad_out[i], rtol=1e-10, atol=1e-12, what=f"{kind} J^T g row {i}")
        assert_close(state.dense_second()[i], sec, rtol=1e-9, atol=1e-10, what=f"{kind} second row {i}")
        assert_close(state.pull_jt(jt_in)[i], jt_in[i] @ jac.T, rtol=1e-10, atol=1e-12, what=f"{kind} pull")
        assert_close(state.interaction(jt_in)[i], jt_in[i] @ sec @ jt_in[i].T, rtol=1e-9, atol=1e-10,
                     what=f"{kind} interaction row {i}")
        k = torch.randn(7, 7, generator=g, dtype=DT)
        assert_close(state.rows(slice(i, i + 1)).sandwich(k[None])[0], jac.T @ k @ jac, rtol=1e-10,
                     atol=1e-12, what=f"{kind} J^T K J row {i}")
    if kind == "l2":
        assert_close(state.dense_second()[3], torch.zeros(7, 7, dtype=DT), what="linear branch")


def _ln_head() -> nn.Module:
    torch.manual_seed(1)
    ln = nn.LayerNorm(6)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.3, 0.3)
    # ViT-style: LN first (no affine) and inside the MLP
    return nn.Sequential(nn.LayerNorm(4, elementwise_affine=False), nn.Linear(4, 6), ln, nn.GELU(),
                         nn.Linear(6, 5)).to(DT).eval()


def _l2_head() -> nn.Module:
    torch.manual_seed(2)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5), L2Normalize()).to(DT)


def _weight_normed_head() -> nn.Module:
    torch.manual_seed(3)
    last = weight_norm(nn.Linear(6, 5, bias=False), dim=0)
    head = nn.Sequential(nn.Linear(4, 6), nn.SiLU(), last).to(DT)
    with torch.no_grad():  # g away from 1 and V changed after construction: the effective weight must follow
        last.parametrizations.weight.original0.uniform_(0.5, 2.0)
        last.parametrizations.weight.original1.add_(0.2)
    return head


def _dino_head() -> nn.Module:
    torch.manual_seed(4)
    # 4 → 8 → 8 → 3 (L2) → weight-normed 3 → 12: the DINOHead layout at toy widths
    return head_from("4-8-8-12:gelu:dino=3", dtype=DT)


HEADS = {"ln": _ln_head, "l2": _l2_head, "weight-norm": _weight_normed_head, "dino": _dino_head}


def _loss(name: str, k: int):
    target = torch.randn(N, k, generator=torch.Generator().manual_seed(7), dtype=DT)
    if name == "dino":
        return analysis_loss("dino", 5.0 * target)
    return analysis_loss(name, target)


# every head under both readings, with a declared-structure loss, and the DINO loss on the DINO head
CASES = [(h, r, loss) for h in HEADS for r in ("ambient", "tangential")
         for loss in (("negative_cosine", "dino") if h == "dino" else ("negative_cosine",))]
CASES += [("ln", "ambient", "mse"), ("weight-norm", "tangential", "mse")]


@pytest.mark.parametrize("head_name,reading,loss_name", CASES)
def test_norm_heads_match_dense_reference(head_name, reading, loss_name):
    head = HEADS[head_name]()
    z = torch.randn(N, 4, generator=torch.Generator().manual_seed(5), dtype=DT)
    with torch.no_grad():
        k = head(z).shape[1]
    loss = _loss(loss_name, k)
    ref_h, ref_g, ref_m = reference_parts(head, loss, z, reading)
    ref = {"H": diagonal_blocks(ref_h, N, 4), "G": diagonal_blocks(ref_g, N, 4), "M": diagonal_blocks(ref_m, N, 4)}
    for strategy in ("sandwich", "jacobian"):
        eh = effective_hessian(head, loss, z, reading=reading, block_strategy=strategy, chunk_size=2)
        what = f"{head_name}/{loss_name}/{reading}/{strategy}"
        for name, got in zip("HGM", eh.decomposed_blocks()):
            assert_close(got, ref[name], what=f"{what} {name}")
        assert_close(eh.blocks(), ref["H"], what=f"{what} blocks()")
        assert eh.structured and eh.info()["block_path"] == "structured-mlp"
        assert eh.block_path().startswith(strategy)


def test_norm_layers_are_recognised():
    layers = mlp_structure.flatten_layers(_ln_head())
    kinds = [type(layer).__name__ for layer in mlp_structure.fuse_affine_runs(layers)]
    # the LN affine is folded into the next Linear; the LN normalisations stay
    assert kinds == ["RowNorm", "Linear", "RowNorm", "Linear", "GELU", "Linear"]
    dino = mlp_structure.fuse_affine_runs(mlp_structure.flatten_layers(_dino_head(), (N, 4)))  # traced
    assert [type(layer).__name__ for layer in dino][-2:] == ["RowNorm", "Linear"]
    assert dino[-2].kind == "l2"


def test_weight_norm_uses_effective_weight():
    head = _weight_normed_head()
    last = head[2]
    fused = mlp_structure.fuse_affine_runs(mlp_structure.flatten_layers(head))
    v, g = last.parametrizations.weight.original1, last.parametrizations.weight.original0
    assert_close(fused[-1].weight, g * v / v.norm(dim=1, keepdim=True), rtol=1e-14, atol=1e-15, what="g V/|V|")


def test_legacy_weight_norm_is_copied_and_read_fresh():
    torch.manual_seed(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the legacy API is deprecated; users still have it
        last = legacy_weight_norm(nn.Linear(6, 5), dim=0)
    head = nn.Sequential(nn.Linear(4, 6), nn.SiLU(), last).to(DT)
    z = torch.randn(N, 4, dtype=DT)
    head(z)  # with grad: ``weight`` becomes a non-leaf tensor, which plain deepcopy refuses
    loss = _loss("negative_cosine", 5)
    eh = effective_hessian(head, loss, z)
    assert eh.structured
    with torch.no_grad():
        head(z)  # a leaf weight, so the reference can copy the head
        last.weight_v.mul_(1.5).add_(0.1)  # ``weight`` is now stale until the next forward
        last.weight_g.mul_(0.7)
    eh = effective_hessian(head, loss, z)
    assert eh.structured
    ref_h = diagonal_blocks(reference_parts(head, loss, z)[0], N, 4)
    assert_close(eh.blocks(), ref_h, what="legacy weight_norm H blocks")


def test_dino_head_never_forms_output_width_jacobians(monkeypatch):
    """At DINO proportions (output ≫ bottleneck) the cost model picks the sandwich, which works at the
    bottleneck: the Jacobian path (J at the output width) must not run; blocks agree with it."""
    torch.manual_seed(8)
    head = head_from("6-16-16-512:gelu:dino=4", dtype=DT)
    z = torch.randn(5, 6, dtype=DT)
    with torch.no_grad():
        teacher = head(torch.randn(5, 6, dtype=DT))
    loss = analysis_loss("dino", teacher)
    plain = lambda u: dino_pair(u, teacher)  # noqa: E731  (nothing declared: loss HVPs)
    reference = effective_hessian(head, loss, z, block_strategy="jacobian").decomposed_blocks()

    def refuse(*args, **kwargs):
        raise AssertionError("the per-sample Jacobian path ran on the DINO head")

    monkeypatch.setattr("headgeom.geometry.engine.block_strategies.chain_pass", refuse)
    eh = effective_hessian(head, loss, z, reading="tangential")
    eh_amb = effective_hessian(head, loss, z)
    for name, got, want in zip("HGM", eh_amb.decomposed_blocks(), reference):
        assert_close(got, want, rtol=1e-9, atol=1e-12, what=f"dino sandwich vs jacobian {name}")
    eh.blocks()
    assert eh_amb.block_path() == eh.block_path() == "sandwich+declared-curvature"
    eh_plain = effective_hessian(head, plain, z)
    assert_close(eh_plain.blocks(), reference[0], rtol=1e-9, atol=1e-12, what="dino plain lambda H")
    assert eh_plain.block_path() == "sandwich+hvp"
    assert mlp_sandwich.tail_width(eh.structured_layers, 512) == 4


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
def test_dino_declared_curvature_matches_autograd(reading):
    """The DINO loss's declared blocks (diagonal + rank 1) and their W-sandwich against autograd."""
    g = torch.Generator().manual_seed(9)
    u = torch.randn(N, 7, generator=g, dtype=DT)
    teacher = torch.randn(N, 7, generator=g, dtype=DT)
    loss = analysis_loss("dino", teacher, student_temp=0.2)
    curv = curvature_for(loss, u, reading)
    w = torch.randn(7, 3, generator=g, dtype=DT)
    sandwiched = curv.sandwich(w, w.T @ w, 7)
    for i in range(N):
        def row_loss(r, i=i):
            rows = [u[j] if j != i else r for j in range(N)]
            return dino_pair(torch.stack(rows), teacher, student_temp=0.2)
        block = hessian(row_loss, u[i])
        if reading == "tangential":
            uh = u[i] / u[i].norm()
            proj = torch.eye(7, dtype=DT) - torch.outer(uh, uh)
            block = proj @ block @ proj
        assert_close(curv.apply(torch.eye(7, dtype=DT)[None].expand(N, 7, 7)[:, :, 0].clone())[i],
                     block[:, 0], rtol=1e-10, atol=1e-13, what=f"{reading} apply row {i}")
        assert_close(sandwiched[i], w.T @ block @ w, rtol=1e-10, atol=1e-13, what=f"{reading} W^T H W row {i}")

