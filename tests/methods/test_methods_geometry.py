"""geometry_problem wiring (docs/design.md#method-interface, docs/paper.md §3.4 "Hessian tracking"): for every
method, loss(head(z1)) from ``geometry_problem`` is the training loss as a function of view 1's
representation z1 with everything else constant.

Reference (written here, independently of headgeom.methods): each method's full training
loss as a function of the per-view representations, from the modules and the objectives'
formulas. Checks: (1) its value equals forward's out["loss"] (so it is the training loss),
(2) its gradient w.r.t. z1, with the other views' representations as separate leaves (the
other branch detached), equals the gradient of loss(head(z1)) (float32, rtol 1e-4),
(3) effective_hessian(head, loss, z1).dense() equals torch.autograd.functional.hessian of the
float64 reference (tolerance 1e-9; train-mode BatchNorm heads included).
"""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.functional import hessian

from headgeom.data import load_shapes
from headgeom.geometry import effective_hessian
from headgeom.methods import METHODS, build_method
from headgeom.objectives import barlow_twins, info_nce, nt_xent, vicreg

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

N = 8
HEADS = {
    "simclr": ("d-12-8:silu:bn", None),
    "simclr_oneway": ("d-12-8:gelu", None),
    "simsiam": ("d-12-8:silu", "d-4-8:silu"),
    "byol": ("d-12-8:silu:bn", "d-6-8:tanh"),
    "vicreg": ("d-12-8:softplus", None),
    "barlow_twins": ("d-12-8:silu:bn:nobias", None),
    "dino": ("d-12-10:gelu:dino=6", None),
    "mocov3": ("d-12-8:silu:bn", "d-6-8:tanh"),
}


def make(name):
    torch.manual_seed(3)
    head, pred = HEADS[name]
    kw = {"teacher_temp": 0.05} if name == "dino" else {}
    m = build_method(name, "resnet18", head=head, predictor=pred,
                     backbone_options={"width": 1 / 32}, **kw)  # feature_dim 16
    x = load_shapes("train", n=N, size=16).images.float() / 255
    rk = {"local_size": 8, "n_local": 1} if name == "dino" else {}
    views = list(m.recipe(16, **rk)(x, torch.Generator().manual_seed(5)))
    return m, views


def cos_mean(p, t):
    return (F.normalize(p, dim=1) * F.normalize(t, dim=1)).sum(dim=1).mean()


def reference_loss(name, m, P, Q, zs, targets, center=None, tt=None):
    """Training loss of method ``name`` from representations zs (list of (N, d)); P, Q the
    projector and predictor, targets the EMA network's outputs per view (BYOL) or per global
    view (DINO), as constants."""
    o = m.options
    if name == "simclr":
        return nt_xent(P(zs[0]), P(zs[1]), o["temperature"])
    if name == "simclr_oneway":
        return info_nce(P(zs[0]), P(zs[1]), o["temperature"])
    if name == "simsiam":
        u1, u2 = P(zs[0]), P(zs[1])
        return -0.5 * (cos_mean(Q(u1), u2.detach()) + cos_mean(Q(u2), u1.detach()))
    if name == "byol":
        p1, p2 = Q(P(zs[0])), Q(P(zs[1]))
        return (2 - 2 * cos_mean(p1, targets[1])) + (2 - 2 * cos_mean(p2, targets[0]))
    if name == "vicreg":
        return vicreg(P(zs[0]), P(zs[1]))
    if name == "barlow_twins":
        return barlow_twins(P(zs[0]), P(zs[1]), o["lambd"])
    if name == "dino":
        s = [P(z) for z in zs]
        terms = []
        for i, t in enumerate(targets):
            q = torch.softmax((t - center) / tt, dim=1)
            for v, sv in enumerate(s):
                if v != i:
                    terms.append(-(q * torch.log_softmax(sv / o["student_temp"], dim=1)).sum(1).mean())
        return sum(terms) / len(terms)
    if name == "mocov3":  # builder.py contrastive_loss: CrossEntropyLoss(q̂ k̂ᵀ / T, arange(N)) · 2T, per view pair
        t = o["temperature"]

        def ctr(q, k):
            logits = F.normalize(q, dim=1) @ F.normalize(k, dim=1).T / t
            return 2 * t * F.cross_entropy(logits, torch.arange(q.shape[0]))

        return ctr(Q(P(zs[0])), targets[1]) + ctr(Q(P(zs[1])), targets[0])
    raise AssertionError(name)


def ema_targets(name, m, views):
    with torch.no_grad():
        if name == "byol":
            return [m.target.module(v) for v in views]
        if name == "mocov3":
            return [m.momentum_encoder.module(v) for v in views]
        if name == "dino":
            return [m.teacher.module(v) for v in views[:2]]
    return None


@pytest.mark.parametrize("name", sorted(METHODS))
def test_geometry_problem_is_the_view1_training_loss(name):
    m, views = make(name)
    out = m(views)
    zs = [z.detach() for z in out["z"]]
    targets = ema_targets(name, m, views)
    center = m.centering.center.clone() if name == "dino" else None
    tt = m.current_teacher_temp if name == "dino" else None

    # (1) the reference is the training loss
    with torch.no_grad():
        ref_value = reference_loss(name, m, m.projector, m.predictor, zs, targets, center, tt)
    torch.testing.assert_close(ref_value, out["loss"].detach(), rtol=1e-5, atol=1e-6)

    # (2) gradient w.r.t. z1 with the other views as separate leaves
    leaves = [z.clone().requires_grad_(True) for z in zs]
    (g_ref,) = torch.autograd.grad(reference_loss(name, m, m.projector, m.predictor, leaves, targets, center, tt),
                                   leaves[0])
    head, loss = m.geometry_problem(out["z"])
    z1 = zs[0].clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(head(z1)), z1)
    assert g.abs().max() > 1e-6, "a vanishing gradient would make the comparison empty"
    torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-7)

    # (3) exact float64 Hessian through the engine against autograd on the reference, on a
    # float64 copy of the method (so the constants closed over are float64 too)
    m64 = copy.deepcopy(m).double()
    out64 = m64([v.double() for v in views])
    z64 = [z.detach() for z in out64["z"]]
    t64 = ema_targets(name, m64, [v.double() for v in views])
    c64 = m64.centering.center.clone() if name == "dino" else None
    head64, loss64 = m64.geometry_problem(out64["z"])

    def ref_of_z1(z1):
        return reference_loss(name, m64, m64.projector, m64.predictor, [z1] + z64[1:], t64, c64, tt)

    H_ref = hessian(ref_of_z1, z64[0]).reshape(N * 16, N * 16)
    H = effective_hessian(head64, loss64, z64[0]).dense()
    assert H.dtype == torch.float64
    scale = float(H_ref.abs().max())
    assert scale > 1e-8
    torch.testing.assert_close(H, H_ref, rtol=1e-8, atol=1e-10 * scale)


def test_geometry_problem_leaves_the_method_unchanged():
    m, views = make("barlow_twins")  # train-mode BatchNorm in the head
    out = m(views)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    m.geometry_problem(out["z"])
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("name", ["byol", "dino", "mocov3"])
def test_ema_methods_refuse_representations_of_another_batch(name):
    m, views = make(name)
    fresh = build_method(name, "resnet18", head=HEADS[name][0], predictor=HEADS[name][1],
                         backbone_options={"width": 1 / 32})
    z = [torch.randn(N, 16) for _ in views]
    with pytest.raises(RuntimeError, match="call out = method"):
        fresh.geometry_problem(z)  # no forward yet
    m(views)
    with pytest.raises(RuntimeError, match="not those of the last forward"):
        m.geometry_problem(z)


def test_geometry_problem_rejects_bad_z():
    m, views = make("simclr")
    with pytest.raises(ValueError, match="at least 2"):
        m.geometry_problem([torch.randn(N, 16)])
    with pytest.raises(ValueError, match=r"shape \(N, 16\)"):
        m.geometry_problem([torch.randn(N, 16), torch.randn(N, 15)])


@pytest.mark.parametrize("name", ["simclr", "vicreg", "barlow_twins"])
def test_coupled_losses_declare_diagonal_blocks_and_they_match_hvps(name):
    """SimCLR's and VICReg's geometry losses carry their closed-form diagonal Hessian blocks;
    with a row-wise head the engine uses them (no loss HVPs) and gets the blocks of the
    undeclared loss, which it computes from HVPs on single-row tangents."""
    torch.manual_seed(3)
    m = build_method(name, "resnet18", head="d-12-8:silu", backbone_options={"width": 1 / 32})
    x = load_shapes("train", n=N, size=16).images.float() / 255
    out = m(list(m.recipe(16)(x, torch.Generator().manual_seed(5))))
    head, loss = m.geometry_problem(out["z"])
    assert loss.diagonal_blocks is not None
    z1 = out["z"][0].detach().double()
    declared = effective_hessian(head, loss, z1)
    g_declared = declared.gauss_newton_blocks()
    assert declared.block_path() == "rows+declared-coupled-blocks"
    plain = effective_hessian(head, lambda u: loss(u), z1)  # same loss, nothing declared
    torch.testing.assert_close(g_declared, plain.gauss_newton_blocks(), rtol=1e-9, atol=1e-12)
    assert build_method("simclr_oneway", "resnet18", backbone_options={"width": 1 / 32}).geometry_problem(
        out["z"])[1].diagonal_blocks is None  # separable: not needed


def test_dino_geometry_problem_declares_its_hessian():
    """The declared (diagonal + rank 1) loss Hessian passes the engine's check against exact HVPs,
    is used, and gives the blocks the undeclared loss gives through HVPs."""
    m, views = make("dino")
    out = m(views)
    zs = [z.detach() for z in out["z"]]
    head, loss = m.geometry_problem(zs)
    declared = effective_hessian(head, loss, zs[0], block_strategy="sandwich", reading="tangential")
    plain = effective_hessian(head, lambda u: loss(u), zs[0], block_strategy="sandwich", reading="tangential",
                              discover_structure=False)
    torch.testing.assert_close(declared.blocks(), plain.blocks(), rtol=1e-9, atol=1e-12)
    assert declared.block_path() == "sandwich+declared-curvature"
    assert plain.block_path() == "sandwich+hvp"


def test_mocov3_geometry_problem_declares_its_hessian():
    """MoCo v3's loss of view 1's queries against the momentum keys is separable; its declared
    per-sample blocks pass the engine's check against exact HVPs, are used, and give the blocks the
    undeclared loss gives through HVPs (a row-wise head: no train-mode BatchNorm)."""
    torch.manual_seed(3)
    m = build_method("mocov3", "resnet18", head="d-12-8:silu", predictor="d-6-8:tanh",
                     backbone_options={"width": 1 / 32})
    x = load_shapes("train", n=N, size=16).images.float() / 255
    out = m(list(m.recipe(16)(x, torch.Generator().manual_seed(5))))
    head, loss = m.geometry_problem(out["z"])
    z1 = out["z"][0].detach().double()
    for reading in ("ambient", "tangential"):
        declared = effective_hessian(head, loss, z1, reading=reading)
        plain = effective_hessian(head, lambda u: loss(u), z1, reading=reading, discover_structure=False)
        torch.testing.assert_close(declared.blocks(), plain.blocks(), rtol=1e-9, atol=1e-12)
        assert declared.block_path().endswith("+declared-curvature") and "declared" not in plain.block_path()
