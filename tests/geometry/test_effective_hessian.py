"""H_eff, G and M against dense float64 references (tests/geometry_reference.py)."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.objectives import AnalysisLoss, barlow_twins, nt_xent, vicreg

from geometry_problems import ACTIVATIONS, D, DT, K, N, WIDTH, make_head, make_loss
from geometry_reference import assert_close, diagonal_blocks, reference_parts

LOSSES = ["mse", "negative_cosine", "nt_xent", "info_nce", "vicreg", "barlow_twins"]


def state_of(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def check_against_reference(head, loss, z, reading="ambient"):
    before, mode = state_of(head), head.training
    h_ref, g_ref, m_ref = reference_parts(head, loss, z, reading)
    eh = effective_hessian(head, loss, z, reading=reading)
    h, g, m = eh.dense(), eh.gauss_newton(), eh.interaction()
    assert_close(h, h_ref, what="H_eff")
    assert_close(g, g_ref, what="G")
    assert_close(m, m_ref, what="M")
    assert_close(g + m, h, what="G + M vs H_eff")
    blocks, g_blocks, m_blocks = eh.decomposed_blocks()
    n, d = z.shape
    assert_close(blocks, diagonal_blocks(h_ref, n, d), what="blocks")
    assert_close(g_blocks, diagonal_blocks(g_ref, n, d), what="G blocks")
    assert_close(m_blocks, diagonal_blocks(m_ref, n, d), what="M blocks")
    assert_close(eh.blocks(), blocks, what="blocks() vs decomposed_blocks()")
    v = torch.randn(n * d, dtype=DT, generator=torch.Generator().manual_seed(5))
    assert_close(eh.matvec(v), h_ref @ v, what="matvec")
    assert_close(eh.matvec(v.reshape(n, d)), (h_ref @ v).reshape(n, d), what="matvec (N, d)")
    assert_close(eh.gauss_newton_matvec(v), g_ref @ v, what="G matvec")
    assert_close(eh.interaction_matvec(v), m_ref @ v, what="M matvec")
    # the analysis never changes the head
    after = state_of(head)
    assert head.training == mode
    for key in before:
        assert torch.equal(before[key], after[key]), f"analysis changed {key}"
    return eh, h_ref, m_ref


@pytest.mark.parametrize("bn", ["none", "eval", "train"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("loss_name", LOSSES)
def test_depth2_heads_match_reference(activation, bn, loss_name):
    head = make_head(activation, 2, bn)
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(3))
    check_against_reference(head, make_loss(loss_name), z)


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("activation", ["linear", "relu", "gelu", "silu", "softplus", "tanh"])
@pytest.mark.parametrize("bn", ["none", "eval", "train"])
def test_depth_1_and_3(activation, depth, bn):
    head = make_head(activation, depth, bn)
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(4))
    for loss_name in ("negative_cosine", "vicreg"):
        check_against_reference(head, make_loss(loss_name), z)


@pytest.mark.parametrize("reading", ["tangential"])
@pytest.mark.parametrize("loss_name", ["negative_cosine", "nt_xent"])
@pytest.mark.parametrize("bn", ["none", "train"])
def test_readings_match_reference(reading, loss_name, bn):
    head = make_head("silu", 2, bn)
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(6))
    eh, _, _ = check_against_reference(head, make_loss(loss_name), z, reading)
    assert eh.info()["reading"] == reading


def test_mse_loss_read_ambient_has_the_premise_g():
    """The collapse theorem's premise ∇²_u L = I/N is the MSE loss's own Hessian: read ambient,
    G = I_N ⊗ J_iᵀJ_i / N per block, with J_i from autograd (written here, not the engine's)."""
    head = make_head("gelu", 3, "none")
    z = torch.randn(N, D, dtype=DT)
    g = effective_hessian(head, make_loss("mse"), z, reading="ambient").gauss_newton()
    jac = [torch.autograd.functional.jacobian(lambda zi: head(zi[None])[0], z[i]) for i in range(N)]
    assert_close(g, torch.block_diag(*[j.T @ j / N for j in jac]), what="G of the MSE loss")


def test_linear_head_has_no_interaction():
    head = make_head("linear", 3, "none")
    z = torch.randn(N, D, dtype=DT)
    eh = effective_hessian(head, make_loss("negative_cosine"), z)
    h, m = eh.dense(), eh.interaction()
    assert torch.linalg.matrix_norm(m) <= 1e-12 * torch.linalg.matrix_norm(h)
    assert torch.linalg.matrix_norm(h) > 0
    assert torch.linalg.matrix_norm(eh.interaction_blocks().reshape(-1, D)) <= 1e-12 * torch.linalg.matrix_norm(h)


@pytest.mark.parametrize("bn", ["none", "eval"])
def test_relu_head_away_from_kinks_has_exactly_zero_interaction(bn):
    head = make_head("relu", 3, bn)
    z = torch.randn(N, D, dtype=DT)
    eh = effective_hessian(head, make_loss("nt_xent"), z)
    assert torch.count_nonzero(eh.interaction_blocks()) == 0
    assert torch.count_nonzero(eh.interaction()) == 0
    assert torch.count_nonzero(eh.rho) > 0


@pytest.mark.parametrize("activation", ["gelu", "silu", "softplus", "tanh"])
def test_smooth_head_with_residual_has_interaction(activation):
    head = make_head(activation, 2, "none")
    z = torch.randn(N, D, dtype=DT)
    eh = effective_hessian(head, make_loss("mse"), z)
    assert eh.rho.abs().max() > 1e-3
    m = eh.interaction_blocks()
    assert torch.linalg.matrix_norm(m).min() > 1e-6


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
@pytest.mark.parametrize("loss_name", ["nt_xent", "vicreg", "barlow_twins"])  # info_nce(u, fixed) is separable
def test_coupled_loss_with_output_narrower_than_input(loss_name, reading):
    """k < d: the G blocks come from the k × k loss-Hessian blocks (k HVPs per sample) instead of
    one HVP per column of J_i; both against the dense float64 reference, and against k >= d."""
    d, k = 7, 3
    head = make_head("gelu", 2, "none", d=d, k=k)
    z = torch.randn(N, d, dtype=DT, generator=torch.Generator().manual_seed(8))
    eh, _, _ = check_against_reference(head, make_loss(loss_name, k=k), z, reading)
    assert not eh.separable_loss and eh.row_wise_head and eh.k < eh.d


def test_separable_loss_gives_block_diagonal_h_eff():
    head = make_head("silu", 2, "eval")
    z = torch.randn(N, D, dtype=DT)
    for name in ("mse", "negative_cosine"):
        eh = effective_hessian(head, make_loss(name), z)
        assert eh.separable_loss and eh.row_wise_head
        four = eh.dense().reshape(N, D, N, D)
        for i in range(N):
            for j in range(N):
                if i != j:
                    assert torch.count_nonzero(four[i, :, j, :]) == 0
    coupled = effective_hessian(head, make_loss("vicreg"), z)
    assert not coupled.separable_loss


def test_structured_and_generic_block_paths_agree():
    head = make_head("softplus", 3, "eval", width=6)
    z = torch.randn(6, D, dtype=DT)
    loss = make_loss("info_nce", n=6)
    structured = effective_hessian(head, loss, z, chunk_size=4)
    assert structured.structured
    frozen = copy.deepcopy(head)
    generic = effective_hessian(lambda x: frozen(x), loss, z, chunk_size=4)  # a callable: generic path
    assert not generic.structured
    for a, b, name in zip(structured.decomposed_blocks(), generic.decomposed_blocks(), "HGM"):
        assert_close(a, b, what=f"{name} blocks, structured vs generic")


class NormalisedHead(nn.Module):
    """A head with its own forward (LayerNorm, tanh, L2-normalised output): traced into a chain."""

    def __init__(self):
        super().__init__()
        self.fc1, self.ln, self.fc2 = nn.Linear(D, WIDTH), nn.LayerNorm(WIDTH), nn.Linear(WIDTH, K)

    def forward(self, z):
        return nn.functional.normalize(self.fc2(torch.tanh(self.ln(self.fc1(z)))), dim=-1)


class ResidualHead(NormalisedHead):
    """The same with a skip connection: not a chain, exercises the generic path."""

    def __init__(self):
        super().__init__()
        self.skip = nn.Linear(D, K)

    def forward(self, z):
        return nn.functional.normalize(self.fc2(torch.tanh(self.ln(self.fc1(z)))) + self.skip(z), dim=-1)


def test_generic_module_head_matches_reference():
    torch.manual_seed(0)
    head = ResidualHead().to(DT)
    z = torch.randn(N, D, dtype=DT)
    eh, _, _ = check_against_reference(head, make_loss("barlow_twins"), z)
    assert not eh.structured and eh.info()["discovered_by"].startswith("generic (")


def test_traced_module_head_matches_reference():
    torch.manual_seed(0)
    head = NormalisedHead().to(DT)
    z = torch.randn(N, D, dtype=DT)
    eh, _, _ = check_against_reference(head, make_loss("barlow_twins"), z)
    assert eh.structured and eh.info()["discovered_by"] == "traced"


def test_float32_is_allowed_and_recorded():
    head = make_head("silu", 2, "none")
    z = torch.randn(N, D, dtype=DT)
    loss = make_loss("negative_cosine")
    eh32 = effective_hessian(head, loss, z, dtype=torch.float32)
    assert eh32.info()["dtype"] == "float32" and eh32.blocks().dtype == torch.float32
    ref = effective_hessian(head, loss, z).blocks()
    assert_close(eh32.blocks().double(), ref, rtol=1e-4, atol=1e-6, what="float32 blocks")


def test_operator_and_scipy_export_match_dense():
    head = make_head("gelu", 2, "train")
    z = torch.randn(N, D, dtype=DT)
    eh = effective_hessian(head, make_loss("nt_xent"), z)
    dense = eh.dense()
    v = torch.randn(N * D, dtype=DT)
    for part, ref in (("H", dense), ("G", eh.gauss_newton()), ("M", eh.interaction())):
        op = eh.to_scipy(part)
        assert op.shape == (N * D, N * D)
        assert_close(torch.from_numpy(op.matvec(v.numpy())), ref @ v, what=f"scipy {part}")


def test_errors_are_clear():
    head = make_head("silu", 2, "none")
    loss = make_loss("mse")
    z = torch.randn(N, D, dtype=DT)
    with pytest.raises(ValueError, match="max_dense"):
        effective_hessian(head, loss, z, max_dense=5).dense()
    with pytest.raises(ValueError, match="blocks"):
        effective_hessian(head, loss, z, max_dense=5).gauss_newton()
    bad = z.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="z has 1 non-finite"):
        effective_hessian(head, loss, bad)
    broken = copy.deepcopy(head)
    with torch.no_grad():
        broken[0].weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match="0.weight"):
        effective_hessian(broken, loss, z)
    with pytest.raises(ValueError, match="rho"):
        effective_hessian(head, lambda u: (u.abs() ** 0.5).sum() * float("nan"), z)
    with pytest.raises(ValueError, match="reading"):
        effective_hessian(head, loss, z, reading="riemannian")
    with pytest.raises(ValueError, match="shape"):
        effective_hessian(head, loss, z).matvec(torch.ones(5, dtype=DT))
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        effective_hessian(head, loss, z[0])
    with pytest.raises(TypeError, match="callable"):
        effective_hessian(42, loss, z)


# ---- coupled losses that declare their diagonal blocks (NT-Xent) ---------------------------
def test_vicreg_diagonal_blocks_equal_autograd():
    """Scales straddle 1 so some variance hinges are active and some are not."""
    from torch.func import hessian as func_hessian

    from headgeom.objectives import vicreg_diagonal_blocks

    for n, k, seed in [(5, 4, 0), (8, 3, 1), (4, 6, 2)]:
        g = torch.Generator().manual_seed(seed)
        scales = torch.tensor([0.3, 0.6, 1.8, 3.0, 0.5, 2.0][:k], dtype=DT)
        a = torch.randn(n, k, generator=g, dtype=DT) * scales
        b = torch.randn(n, k, generator=g, dtype=DT)
        kw = dict(sim_coeff=25.0, std_coeff=20.0, cov_coeff=1.5, eps=1e-3)
        full = func_hessian(lambda u: vicreg(u, b, **kw))(a)
        ref = torch.stack([full[i, :, i, :] for i in range(n)])
        std = torch.sqrt(a.var(dim=0) + 1e-3)
        assert bool((std < 1).any()) and bool((std > 1).any())
        assert_close(vicreg_diagonal_blocks(a, b, **kw), ref, what="VICReg diagonal blocks")


@pytest.mark.parametrize("n,k,lambd", [(5, 4, 0.0051), (8, 3, 0.3), (4, 6, 1.0)])
def test_barlow_twins_diagonal_blocks_equal_autograd(n, k, lambd):
    from torch.func import hessian as func_hessian

    from headgeom.objectives import barlow_twins_diagonal_blocks

    g = torch.Generator().manual_seed(n * k)
    a = torch.randn(n, k, generator=g, dtype=DT) * 2 + 0.5
    b = torch.randn(n, k, generator=g, dtype=DT)
    full = func_hessian(lambda u: barlow_twins(u, b, lambd, 1e-3))(a)
    ref = torch.stack([full[i, :, i, :] for i in range(n)])
    assert full[0, :, 1, :].abs().max() > 1e-6  # coupled through the batch standardisation
    assert_close(barlow_twins_diagonal_blocks(a, b, lambd, 1e-3), ref, what="Barlow Twins diagonal blocks")


@pytest.mark.parametrize("n,k,temperature", [(5, 4, 0.5), (3, 6, 0.1), (6, 3, 1.0)])
def test_nt_xent_diagonal_blocks_equal_autograd(n, k, temperature):
    from torch.func import hessian as func_hessian

    from headgeom.objectives import nt_xent_diagonal_blocks

    g = torch.Generator().manual_seed(n + k)
    a = torch.randn(n, k, generator=g, dtype=DT) * 2
    b = torch.randn(n, k, generator=g, dtype=DT)
    full = func_hessian(lambda u: nt_xent(u, b, temperature))(a)  # (n, k, n, k)
    ref = torch.stack([full[i, :, i, :] for i in range(n)])
    assert ref.abs().max() > 1e-3 and full[0, :, 1, :].abs().max() > 1e-6  # coupled: off-diagonal blocks
    assert_close(nt_xent_diagonal_blocks(a, b, temperature), ref, what="NT-Xent diagonal blocks")


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
@pytest.mark.parametrize("d,k", [(7, 3), (3, 5)])
@pytest.mark.parametrize("name,kwargs", [("nt_xent", {"temperature": 0.3}), ("vicreg", {"std_coeff": 20.0}),
                                         ("barlow_twins", {"lambd": 0.2})])
def test_declared_coupled_blocks_give_the_reference_without_loss_hvps(d, k, reading, name, kwargs):
    from headgeom.objectives import analysis_loss

    head = make_head("silu", 2, "none", d=d, k=k)
    z = torch.randn(N, d, dtype=DT, generator=torch.Generator().manual_seed(9))
    other = torch.randn(N, k, dtype=DT, generator=torch.Generator().manual_seed(10))
    loss = analysis_loss(name, other, **kwargs)
    assert loss.diagonal_blocks is not None
    eh, _, _ = check_against_reference(head, loss, z, reading)
    assert eh.block_path() == "rows+declared-coupled-blocks"


def test_a_wrong_coupled_declaration_is_refused():
    head = make_head("gelu", 2, "none")
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(2))
    loss = make_loss("nt_xent")

    def declared(u):
        return lambda_blocks(u) * 1.01  # off by 1 %

    from headgeom.objectives import nt_xent_diagonal_blocks
    other = torch.randn(N, K, dtype=DT, generator=torch.Generator().manual_seed(1))
    lambda_blocks = lambda u: nt_xent_diagonal_blocks(u, other)  # noqa: E731  (make_loss's target)
    wrapped = AnalysisLoss(lambda u: loss(u), diagonal_blocks=declared)
    with pytest.raises(ValueError, match="declared diagonal_blocks disagree"):
        effective_hessian(head, wrapped, z).gauss_newton_blocks()
    wrapped = AnalysisLoss(wrapped.fn, diagonal_blocks=lambda_blocks)  # the right declaration passes the check
    g = effective_hessian(head, wrapped, z).gauss_newton_blocks()
    assert_close(g, effective_hessian(head, loss, z).gauss_newton_blocks(), what="declared vs HVP blocks")
