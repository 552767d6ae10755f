"""GeometryTracker against an independent float64 autograd Hessian on a fake SSL method.

The fake follows docs/design.md#method-interface: geometry_problem(z_views) -> (projector, loss) with
loss(u) = negative_cosine(u, sg(projector(z_2))), the target fixed once computed. The
reference differentiates the whole batch loss as a function of z_1 with
torch.autograd.functional.hessian (float64) and reads the diagonal (d, d) blocks; M is the
Hessian of <rho, h(z_1)> with rho = dL/du from autograd. Tolerances: 1e-8 relative to the
largest |eigenvalue| (float64 through two different differentiation routes).
"""
import copy
import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.head_function import prepare_head
from headgeom.geometry.linalg.shifted_power import shifted_power_lambda_min
from headgeom.heads import head_from
from headgeom.objectives import negative_cosine
from headgeom.objectives.declared import as_analysis_loss
from headgeom.runs.metrics import MetricsRecord
from headgeom.tracking import GeometryTracker, TrackingRecord

from geometry_reference import assert_close, diagonal_blocks, reference_parts
from geometry_problems import D as D_EH, N as N_EH, make_head, make_loss

D, K, IMG = 4, 3, (2, 2, 2)  # representation dim, head output dim, tiny "images"


class FakeMethod(nn.Module):
    """A backbone with BatchNorm (buffers to protect), a SiLU projector (optionally with BN)."""

    def __init__(self, bn_head: bool = False, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(8, D), nn.BatchNorm1d(D))
        self.projector = head_from(f"{D}-5-{K}:silu" + (":bn" if bn_head else ""))
        self.predictor = None

    def forward(self, views):
        z = [self.backbone(v) for v in views]
        u = [self.projector(zi) for zi in z]
        return {"loss": negative_cosine(u[0], u[1]), "z": z, "logs": {}}

    def geometry_problem(self, z_views):
        target = self.projector(z_views[1]).detach()
        # constants follow the analysis dtype (as headgeom.methods' frozen(): F.cosine_similarity
        # of float64 against float32 computes in float32)
        return self.projector, lambda u: negative_cosine(u, target.to(u.dtype))

    def head_parameters(self):
        return self.projector.parameters()

    def backbone_parameters(self):
        return self.backbone.parameters()


def _views(n: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *IMG, generator=g) for _ in range(2)]


def _reference(method: FakeMethod, views, head_mode="train", reduction="mean", reading="ambient"):
    """Independent (H, G, M) diagonal blocks (N, d, d), float64 autograd on a copy of the method."""
    m = copy.deepcopy(method)
    m.backbone.eval()
    with torch.no_grad():
        z1, z2 = (m.backbone(v) for v in views)
    m.train(head_mode == "train")
    with torch.no_grad():
        target = m.projector(z2).double()
    head = copy.deepcopy(m.projector).double()
    for b in head.modules():  # train-mode BN: batch statistics, no running-stat updates in the reference
        if isinstance(b, nn.BatchNorm1d) and b.training:
            b.track_running_stats, b.running_mean, b.running_var = False, None, None
    z = z1.double()
    n = z.shape[0]
    loss = lambda u: -torch.nn.functional.cosine_similarity(u, target, dim=1).mean()  # noqa: E731
    full = hessian(lambda zf: loss(head(zf.reshape(n, D))), z.reshape(-1)).reshape(n, D, n, D)
    u = head(z).detach().requires_grad_(True)
    rho = torch.autograd.grad(loss(u), u)[0].detach()
    m_full = hessian(lambda zf: (rho * head(zf.reshape(n, D))).sum(), z.reshape(-1)).reshape(n, D, n, D)
    idx = torch.arange(n)
    h_blocks, m_blocks = full[idx, :, idx, :], m_full[idx, :, idx, :]
    if reading == "tangential":  # G_i = J_i^T C_i J_i, J from autograd on the row-wise head
        jac = torch.stack([jacobian(lambda zi: head(zi[None])[0], z[i]) for i in range(n)])  # (n, k, d)
        # C_i = P_i [d2L/du2]_ii P_i, P_i = I - u_i u_i^T / |u_i|^2
        huu = hessian(loss, u.detach()).reshape(n, K, n, K)[idx, :, idx, :]
        uh = u.detach() / u.detach().norm(dim=1, keepdim=True)
        proj = torch.eye(K, dtype=z.dtype) - uh[:, :, None] * uh[:, None, :]
        curv = proj @ huu @ proj
        h_blocks = jac.transpose(1, 2) @ curv @ jac + m_blocks
    scale = n if reduction == "sum" else 1.0
    return scale * h_blocks, scale * (h_blocks - m_blocks), scale * m_blocks, z1


def _expected(h, m, rel_floor=1e-10):
    lam = np.linalg.eigvalsh(h.numpy())
    floor = rel_floor * np.abs(lam).max()
    fro = math.sqrt(float((m ** 2).sum())) / math.sqrt(float((h ** 2).sum()))
    spec = max(np.abs(np.linalg.eigvalsh(mi)).max() for mi in m.numpy()) / np.abs(lam).max()
    return {"lambda_min": lam.min(), "lambda_max": lam.max(), "n_negative": int((lam < -floor).sum()),
            "frac": float(((lam < -floor).sum(1) > 0).mean()), "fro": fro, "spectral": spec}


def _check(out, exp, prefix, tol=1e-8):
    scale = max(abs(exp["lambda_min"]), abs(exp["lambda_max"]))
    assert out[prefix + "lambda_min"] == pytest.approx(exp["lambda_min"], abs=tol * scale)
    assert out[prefix + "lambda_max"] == pytest.approx(exp["lambda_max"], abs=tol * scale)
    assert out[prefix + "n_negative"] == exp["n_negative"]
    assert out[prefix + "frac_samples_negative"] == pytest.approx(exp["frac"])
    assert out[prefix + "M_ratio_fro"] == pytest.approx(exp["fro"], rel=1e-7)
    assert out[prefix + "M_ratio_spectral"] == pytest.approx(exp["spectral"], rel=1e-7)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_row_wise_head_matches_autograd(reduction, tmp_path):
    method, views = FakeMethod(), _views(6)
    h, _, m, _ = _reference(method, views, reduction=reduction)
    exp = _expected(h, m)
    assert exp["n_negative"] > 0 and exp["fro"] > 1e-3  # the ambient cosine reading is indefinite, M ≠ 0
    tracker = GeometryTracker(views, reading="ambient", reduction=reduction)
    out = tracker(0, method)
    _check(out, exp, f"heff_ambient_{reduction}_")
    assert tracker.metadata()["last_call"]["block_path"] in ("structured-mlp", "generic-torch.func")
    meta = json.loads(tracker.write_metadata(tmp_path / "tracking.json").read_text())
    assert meta["reduction"] == reduction and meta["reading"] == "ambient" and meta["last_call"]["N"] == 6
    if reduction == "sum":  # "sum" = the per-sample loss's Hessian: compare with a single sample's
        z1 = _reference(method, views)[3].double()
        head = copy.deepcopy(method.projector).double()
        with torch.no_grad():
            t0 = copy.deepcopy(method).backbone.eval()(views[1])
            target0 = method.projector(t0)[0].double()
        per = hessian(lambda zi: -torch.nn.functional.cosine_similarity(head(zi[None])[0], target0, dim=0), z1[0])
        assert torch.allclose(per, h[0], rtol=1e-9, atol=1e-12)


def test_the_tracker_reuses_the_analysis_copy_of_its_head_only_while_unchanged():
    """The tracker owns its HeadCache: an unchanged projector's analysis copy is reused across
    measurements; a change in place (through .data: no version bump) is measured as it is now."""
    method, views = FakeMethod(seed=4), _views(5)
    tracker = GeometryTracker(views)
    cpu = torch.device("cpu")
    tracker(0, method)
    kept = prepare_head(method.projector, tracker.dtype, cpu, tracker.head_cache)
    tracker(1, method)
    assert prepare_head(method.projector, tracker.dtype, cpu, tracker.head_cache) is kept
    assert len(tracker.head_cache) == 1
    next(method.projector.parameters()).data.mul_(1.5).add_(0.1)
    out = tracker(2, method)
    assert prepare_head(method.projector, tracker.dtype, cpu, tracker.head_cache) is not kept
    h, _, m, _ = _reference(method, views)
    _check(out, _expected(h, m), "heff_ambient_mean_")


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
def test_readings_and_block_subset_match_autograd(reading):
    method, views = FakeMethod(seed=3), _views(7, seed=5)
    h, _, m, _ = _reference(method, views, reading=reading)
    out = GeometryTracker(views, reading=reading, block_samples=3)(0, method)
    _check(out, _expected(h[:3], m[:3]), f"heff_{reading}_mean_")


def test_the_record_is_what_the_call_logs():
    """measure() gives the typed record; the loop's call gives its flat keys, and those keys parse
    back (as read_tracking reads a run) into the same record."""
    method, views = FakeMethod(seed=2), _views(5, seed=3)
    record = GeometryTracker(views, reading="tangential", updates=False).measure(4, method)
    logged = GeometryTracker(views, reading="tangential", updates=False)(4, method)
    assert record.step == 4 and record.metrics() == logged and record.updates is None
    h = record.reading("tangential")
    assert h.source == "blocks" and logged["heff_tangential_mean_lambda_min"] == h.lambda_min
    assert logged["spread_projector"] == record.statistics.spread_projector
    line = json.loads(MetricsRecord(4, logged).to_line())
    assert TrackingRecord.from_metrics(MetricsRecord(line.pop("step"), line)) == record
    assert GeometryTracker(views, every=3)(4, method) == {}  # not due: nothing measured


@pytest.mark.parametrize("loss_name,reading", [("negative_cosine", "tangential"), ("vicreg", "ambient"),
                                               ("nt_xent", "ambient")])
def test_the_subset_blocks_are_those_of_the_first_rows_problem(loss_name, reading):
    """block_samples = b < N on a row-wise head: the tracker asks its one engine for rows=b; the
    blocks equal those of the sub-problem u_sub ↦ L([u_sub; u[b:]]) (the second engine it built
    before, objectives.declared.first_rows) and the dense float64 reference, batch-coupled losses too."""
    head, loss = make_head("silu", 2, "none"), make_loss(loss_name)
    z = torch.randn(N_EH, D_EH, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    b = 2
    eh = effective_hessian(head, loss, z, reading=reading)
    got = eh.decomposed_blocks(rows=b)
    sub = effective_hessian(head, as_analysis_loss(loss).first_rows(b, eh.u), z[:b], reading=reading)
    ref = [diagonal_blocks(x, N_EH, D_EH)[:b] for x in reference_parts(head, loss, z, reading)]
    for part, g, s, r in zip("HGM", got, sub.decomposed_blocks(), ref):
        assert_close(g, s, rtol=1e-12, atol=1e-14, what=f"{loss_name} {part} vs first_rows")
        assert_close(g, r, what=f"{loss_name} {part} vs reference")


def test_power_iteration_column_runs_on_the_exact_blocks():
    """The paper's estimator on the tracked blocks: the same number as the estimator on the autograd
    reference blocks (float32 round-off apart), and a Rayleigh quotient between λ_min and λ_max."""
    method, views = FakeMethod(seed=3), _views(6, seed=4)
    h, _, _, _ = _reference(method, views)
    out = GeometryTracker(views, power_iterations=20)(0, method)
    h32 = h.float()
    ref = shifted_power_lambda_min(lambda v: torch.bmm(h32, v[..., None])[..., 0], tuple(h.shape[:2]))
    scale = max(abs(out["heff_ambient_mean_lambda_min"]), abs(out["heff_ambient_mean_lambda_max"]))
    assert out["heff_ambient_mean_power_lambda_min"] == pytest.approx(ref.lambda_min, abs=1e-4 * scale)
    assert out["heff_ambient_mean_power_shift"] == pytest.approx(ref.shift, abs=1e-4 * scale)
    assert (out["heff_ambient_mean_lambda_min"] - 1e-4 * scale <= out["heff_ambient_mean_power_lambda_min"]
            <= out["heff_ambient_mean_lambda_max"] + 1e-4 * scale)
    assert "heff_ambient_mean_power_lambda_min" not in GeometryTracker(views)(0, method)  # off by default


def test_float32_analysis_is_close_to_float64():
    method, views = FakeMethod(seed=9), _views(6, seed=7)
    out64 = GeometryTracker(views)(0, method)
    tracker = GeometryTracker(views, dtype=torch.float32)
    out32 = tracker(0, method)
    assert tracker.metadata()["last_call"]["dtype"] == "float32"
    scale = max(abs(out64["heff_ambient_mean_lambda_min"]), abs(out64["heff_ambient_mean_lambda_max"]))
    for key in ("lambda_min", "lambda_max"):
        assert out32["heff_ambient_mean_" + key] == pytest.approx(out64["heff_ambient_mean_" + key], abs=1e-5 * scale)


@pytest.mark.parametrize("block_samples", [None, 2])
def test_train_mode_batchnorm_head_uses_coupled_path(block_samples):
    method, views = FakeMethod(bn_head=True, seed=4), _views(5, seed=2)
    h, _, m, _ = _reference(method, views, head_mode="train")
    b = 5 if block_samples is None else block_samples
    tracker = GeometryTracker(views, block_samples=block_samples, coupled="blocks")
    out = tracker(0, method)
    _check(out, _expected(h[:b], m[:b]), "heff_ambient_mean_")
    path = tracker.metadata()["last_call"]["block_path"]
    assert "coupled" in path and (block_samples is None or "first 2 of 5" in path)
    # eval mode: BN uses running statistics, the head is row-wise again
    h_e, _, m_e, _ = _reference(method, views, head_mode="eval")
    tr_e = GeometryTracker(views, head_mode="eval")
    _check(tr_e(0, method), _expected(h_e, m_e), "heff_ambient_mean_")
    assert "coupled" not in tr_e.metadata()["last_call"]["block_path"]


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_coupled_head_lanczos_matches_the_whole_autograd_hessian(reduction):
    method, views = FakeMethod(bn_head=True, seed=4), _views(5, seed=2)
    m = copy.deepcopy(method)
    m.backbone.eval()
    with torch.no_grad():
        z1, z2 = (m.backbone(v) for v in views)
        target = m.train().projector(z2).double()
    head = copy.deepcopy(m.projector).double()
    for b in head.modules():
        if isinstance(b, nn.BatchNorm1d):
            b.track_running_stats, b.running_mean, b.running_var = False, None, None
    z = z1.double()
    n = z.shape[0]
    loss = lambda u: -torch.nn.functional.cosine_similarity(u, target, dim=1).mean()  # noqa: E731
    full = hessian(lambda zf: loss(head(zf.reshape(n, D))), z.reshape(-1))
    u = head(z).detach().requires_grad_(True)
    rho = torch.autograd.grad(loss(u), u)[0].detach()
    mm = hessian(lambda zf: (rho * head(zf.reshape(n, D))).sum(), z.reshape(-1))
    scale = n if reduction == "sum" else 1.0
    lam = np.linalg.eigvalsh(full.numpy()) * scale
    tracker = GeometryTracker(views, reduction=reduction)  # coupled="lanczos" is the default
    out = tracker(0, method)
    p = f"heff_ambient_{reduction}_op_"
    top = np.abs(lam).max()
    assert out[p + "lambda_min"] == pytest.approx(lam.min(), abs=1e-8 * top)
    assert out[p + "lambda_max"] == pytest.approx(lam.max(), abs=1e-8 * top)
    assert out[p + "converged"] == 1.0 and out[p + "iterations"] <= n * D
    ratio = np.abs(np.linalg.eigvalsh(mm.numpy())).max() / (np.abs(lam).max() / scale)
    assert out[p + "M_ratio_spectral"] == pytest.approx(ratio, rel=1e-6)
    if p + "n_negative" in out:  # the Krylov space spanned all n*d dimensions
        assert out[p + "n_negative"] == int((lam < -1e-10 * top).sum())
    assert "heff_ambient_mean_lambda_min" not in out  # block keys are not reused for the whole operator
    assert tracker.metadata()["last_call"]["block_path"].startswith("lanczos")


def _np_spread(x):
    x = x.astype(np.float64)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    return float(np.std(xn, axis=0, ddof=1).mean())


def test_statistics_of_z_and_head_outputs():
    method, views = FakeMethod(seed=6), _views(9, seed=3)
    m = copy.deepcopy(method)
    m.backbone.eval()
    with torch.no_grad():
        z1 = m.backbone(views[0])
        m.train()
        p = m.projector(z1)
    out = GeometryTracker(views)(0, method)
    assert out["spread_z"] == pytest.approx(_np_spread(z1.numpy()), rel=1e-10)
    assert out["spread_projector"] == pytest.approx(_np_spread(p.numpy()), rel=1e-10)
    assert out["spread_head"] == pytest.approx(_np_spread(p.numpy()), rel=1e-5)  # head = projector here, float64
    lam = np.linalg.eigvalsh(np.cov(z1.double().numpy(), rowvar=False))
    kept = lam[lam > 1e-6 * lam.max()]  # the tracker's default cov_rel_tol
    assert out["cov_condition_z"] == pytest.approx(kept.max() / kept.min(), rel=1e-8)
    assert out["cov_rank_z"] == kept.size
    s = np.linalg.svd(p.double().numpy(), compute_uv=False)
    q = s / s.sum() + 1e-7
    assert out["rankme_projector"] == pytest.approx(float(np.exp(-(q * np.log(q)).sum())), rel=1e-10)


def test_method_is_left_unchanged():
    method, views = FakeMethod(bn_head=True, seed=7), _views(6)
    method.train()
    method.projector.eval()  # mixed modes must come back as they were
    before = {k: v.clone() for k, v in method.state_dict().items()}
    modes = [mod.training for mod in method.modules()]
    rng = torch.get_rng_state()
    tracker = GeometryTracker(views)
    first = tracker(0, method)
    with torch.no_grad():  # a loop may call it under no_grad: same numbers
        second = tracker(1, method)
    key = "heff_ambient_mean_op_lambda_min"  # train-mode BN head: Lanczos on the whole H_eff
    assert second[key] == pytest.approx(first[key], rel=1e-12)
    after = method.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # params and BN running stats
    assert [mod.training for mod in method.modules()] == modes
    assert torch.equal(torch.get_rng_state(), rng)


def test_update_ratio_between_calls():
    method, views = FakeMethod(seed=8), _views(4)
    tracker = GeometryTracker(views, every=5)
    first = tracker(0, method)
    assert "update_ratio" not in first
    assert tracker(3, method) == {}  # not a tracking step
    with torch.no_grad():
        for p in method.backbone.parameters():
            p.mul_(1.5)
        head = list(method.projector.parameters())
        before = math.sqrt(sum(float(p.double().square().sum()) for p in head))
        head[0].add_(0.1)
        change = 0.1 * math.sqrt(head[0].numel())
    resumed = GeometryTracker(views, every=5)  # as after a resume: state from the checkpoint
    resumed.load_state_dict(tracker.state_dict())
    out = tracker(5, method)
    assert resumed(5, method)["update_ratio"] == out["update_ratio"]
    assert out["update_backbone_rel"] == pytest.approx(0.5, rel=1e-6)
    assert out["update_head_rel"] == pytest.approx(change / before, rel=1e-6)
    assert out["update_ratio"] == pytest.approx(change / before / 0.5, rel=1e-6)
    assert out["update_steps"] == 5.0


def test_without_updates_no_parameter_copy_is_kept():
    """updates=False: no update keys, no parameter snapshot, and no parameter-group methods needed."""
    method, views = FakeMethod(seed=8), _views(4)
    tracker = GeometryTracker(views, updates=False)
    tracker(0, method)
    second = tracker(1, method)
    assert not any(k.startswith("update_") for k in second)
    assert tracker.state_dict() == {"updates": None} and tracker.metadata()["updates"] is False

    class WithoutGroups(FakeMethod):  # the protocol's parameter groups only serve the update ratio
        def __getattribute__(self, name):
            if name in ("head_parameters", "backbone_parameters"):
                raise AttributeError(name)
            return super().__getattribute__(name)

    bare = WithoutGroups(seed=8)
    assert tracker(2, bare)["heff_ambient_mean_lambda_min"] == second["heff_ambient_mean_lambda_min"]
    with pytest.raises(TypeError, match="head_parameters"):
        GeometryTracker(views)(0, bare)
    with pytest.raises(ValueError, match="updates"):
        GeometryTracker(views, updates="no")


def test_errors_on_bad_input():
    views = _views(4)
    for kwargs, match in [({"every": 0}, "every"), ({"reading": "exact"}, "reading"),
                          ({"reduction": "median"}, "reduction"), ({"block_samples": 0}, "block_samples"),
                          ({"head_mode": "frozen"}, "head_mode"), ({"dtype": torch.int64}, "dtype"),
                          ({"rel_floor": 1.5}, "rel_floor"), ({"power_iterations": 0}, "power_iterations"),
                          ({"reading": "mse"}, "reading")]:
        with pytest.raises(ValueError, match=match):
            GeometryTracker(views, **kwargs)
    with pytest.raises(ValueError, match="list of view"):
        GeometryTracker(views[0])
    with pytest.raises(ValueError, match="same N"):
        GeometryTracker([views[0], views[1][:3]])
    with pytest.raises(ValueError, match="at least 2"):
        GeometryTracker([v[:1] for v in views])
    with pytest.raises(ValueError, match="no probe batch"):
        GeometryTracker()(0, FakeMethod())
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode"):
        GeometryTracker(views)(0, FakeMethod())
    with pytest.raises(TypeError, match="SSLMethod protocol"):
        GeometryTracker(views)(0, nn.Linear(2, 2))
    # a coupled head with N*d above the engine's dense limit needs block_samples
    big = [torch.randn(1600, *IMG) for _ in range(2)]
    with pytest.raises(ValueError, match="block_samples"):
        GeometryTracker(big, coupled="blocks")(0, FakeMethod(bn_head=True))
    for kwargs in ({"coupled": "dense"}, {"lanczos_k": 0}, {"lanczos_max_iter": 1.5}, {"lanczos_tol": 0.0}):
        with pytest.raises(ValueError):
            GeometryTracker(views, **kwargs)


def test_the_view_gap_is_the_angle_between_the_two_views_projector_outputs():
    """Against a hand computation: numpy arccos of the normalised dot products of projector(z1_i) and
    projector(z2_i), z = the backbone in eval mode, mean and std (ddof=1) over the probe samples, in degrees."""
    method = FakeMethod()
    views = _views(6)
    stats = GeometryTracker(views, updates=False).measure(0, method).statistics
    m = copy.deepcopy(method).eval()
    with torch.no_grad():
        u1, u2 = (m.projector(m.backbone(v)).double().numpy() for v in views)
    cos = (u1 * u2).sum(1) / (np.linalg.norm(u1, axis=1) * np.linalg.norm(u2, axis=1))
    angles = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    assert stats.view_gap_deg == pytest.approx(float(angles.mean()), rel=1e-5)
    assert stats.view_gap_deg_std == pytest.approx(float(angles.std(ddof=1)), rel=1e-4)
    assert 0 < stats.view_gap_deg < 180
    record = GeometryTracker(views, updates=False).measure(0, method)
    assert record.metrics()["view_gap_deg"] == pytest.approx(stats.view_gap_deg)
