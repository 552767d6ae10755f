"""headgeom.orbits.tangent_metric (C6/C7 on real models): quotients against dense float64 autograd
(explicit Jacobians and loss Hessians), tangents against central differences, an exactly invariant
head, Fisher ranks against numpy.linalg.matrix_rank and errors (the figure:
tests/report/plots/test_plots_orbits.py)."""
import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian

from headgeom.augment.families import get_family
from headgeom.geometry.invariance.fisher import null_space_fraction
from headgeom.geometry.invariance.tangents import random_unit_directions
from headgeom.orbits.tangent_metric import tangent_metric_analysis
from headgeom.orbits.tangent_summary import quotient_summary

pytestmark = pytest.mark.usefixtures("one_thread")

H = W = 6
M = 3  # random directions per image
MEAN, STD = (0.4, 0.5, 0.45), (0.2, 0.25, 0.3)


def images(n=3, seed=0):
    """Pixels in [0.1, 0.8]: no colour clamping at the tangent points used here."""
    g = torch.Generator().manual_seed(seed)
    return 0.1 + 0.7 * torch.rand(n, 3, H, W, generator=g, dtype=torch.float64)


class Backbone(nn.Module):
    """A smooth row-wise conv backbone (N, 3, H, W) -> (N, 4)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(4 * H * W, 4)

    def forward(self, x):
        return self.lin(torch.tanh(self.conv(x)).flatten(1))


def smooth_head(k=5, d=4):
    torch.manual_seed(2)
    return nn.Sequential(nn.Linear(d, 7), nn.Tanh(), nn.Linear(7, k))


def q_from(summary, which):
    return torch.tensor([10.0 ** v if v is not None else 0.0 for v in summary[f"log10_{which}"]],
                        dtype=torch.float64)


def normed(f):
    m = torch.tensor(MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    s = torch.tensor(STD, dtype=torch.float64).view(1, 3, 1, 1)
    return lambda y: f((y - m) / s)


def directions(n, d, seed=0):
    """The documented draw order: per batch, pixel directions (b, m, 3, H, W), then z (b, m, d)."""
    g = torch.Generator().manual_seed(seed)
    return (random_unit_directions((n, M, 3, H, W), g, torch.float64, sample_dims=3),
            random_unit_directions((n, M, d), g, torch.float64))


def dense_reference(bb, head, x, fam, xi0, loss):
    """Per image: dense J_b (pixels), J_h, the pixel tangent by central differences, and the
    per-sample loss Hessian by autograd.functional.hessian, then every quotient explicitly."""
    f = get_family(fam)
    pix_to_z = normed(bb.double().eval())
    e_pix, e_z = directions(x.shape[0], 4)
    out = {k: ([], []) for k in ("backbone", "end_to_end", "head_G", "head_loss")}
    for i in range(x.shape[0]):
        xi_ = x[i:i + 1]
        h = 1e-6
        u = ((f.apply(xi_, xi0 + h) - f.apply(xi_, xi0 - h)) / (2 * h)).flatten()
        at = f.apply(xi_, xi0)
        jb = jacobian(lambda p: pix_to_z(p.view(1, 3, H, W)).squeeze(0), at.flatten())  # (d, P)
        z = pix_to_z(at).squeeze(0)
        jh = jacobian(lambda v: head(v.unsqueeze(0)).squeeze(0), z)  # (k, d)
        c = head(pix_to_z(xi_)).squeeze(0)
        if loss == "negative_cosine":
            per = lambda w: -torch.dot(w, c) / (w.norm() * c.norm())
        else:
            per = lambda w: 0.5 * (w - c).pow(2).sum()
        hl = hessian(per, head(z.unsqueeze(0)).squeeze(0))
        t = jb @ u
        ep, ez = e_pix[i].flatten(1), e_z[i]
        q = lambda a, v: (v @ a @ v) / (v @ v)
        g, gl = jh.T @ jh, jh.T @ hl @ jh
        e2e = (jh @ jb).T @ (jh @ jb)
        b = jb.T @ jb
        for name, a, tv, rand in (("backbone", b, u, ep), ("end_to_end", e2e, u, ep),
                                  ("head_G", g, t, ez), ("head_loss", gl, t, ez)):
            out[name][0].append(q(a, tv))
            out[name][1].extend(q(a, r) for r in rand)
    return {k: (torch.stack(a), torch.stack(b)) for k, (a, b) in out.items()}


@pytest.mark.parametrize("fam,xi0,loss", [("rotation", 10.0, "negative_cosine"),
                                          ("brightness", 1.2, "negative_cosine"),
                                          ("saturation", None, "mse")])
def test_quotients_match_dense_autograd(fam, xi0, loss):
    x = images()
    bb, head = Backbone(), smooth_head().double()
    res = tangent_metric_analysis(bb, head, x, [fam], xi0=xi0, loss=loss, n_random=M, mean=MEAN, std=STD)
    point = get_family(fam).tangent_point if xi0 is None else xi0
    ref = dense_reference(bb, head, x, fam, point, loss)
    entry = res["families"][fam]
    for metric, (rt, rr) in ref.items():
        # log10 values to 1e-7: relative 2e-7 (the reference tangent is a central difference).
        torch.testing.assert_close(q_from(entry[metric], "tangent"), rt.abs(), rtol=2e-7, atol=0)
        torch.testing.assert_close(q_from(entry[metric], "random"), rr.abs(), rtol=1e-9, atol=0)
        neg = (torch.cat([rt, rr]) < 0).double().mean()
        got = (entry[metric]["tangent"]["frac_negative"] * 3 + entry[metric]["random"]["frac_negative"] * 9) / 12
        assert got == pytest.approx(float(neg))
    if loss == "mse":  # ∇²L = I per sample: the loss metric is G
        assert entry["head_loss"]["log10_random"] == pytest.approx(entry["head_G"]["log10_random"])
    assert entry["tangent_check"]["rel_err_max"] < 1e-6  # jvp tangent vs central difference
    json.dumps(res, allow_nan=False)


def test_summary_statistics_follow_their_definitions():
    x = images(4)
    res = tangent_metric_analysis(Backbone(), smooth_head().double(), x, ["hue"], n_random=M)
    s = res["families"]["hue"]["head_G"]
    t, r = q_from(s, "tangent"), q_from(s, "random")
    lower_median = lambda v: float(v.sort().values[(v.numel() - 1) // 2])
    assert s["ratio_of_medians"] == pytest.approx(lower_median(t) / lower_median(r), rel=1e-12)
    assert s["tangent"]["median_log10"] == pytest.approx(math.log10(lower_median(t)), rel=1e-12)
    assert s["random"]["mean_log10"] == pytest.approx(float(r.log10().mean()), rel=1e-12)
    assert s["frac_tangent_below_random_median"] == float((t < lower_median(r)).double().mean())
    pairs = (t[:, None] < r[None, :]).double().mean()
    assert s["p_below"] == pytest.approx(float(pairs))
    lo, hi = s["ratio_ci"]["ci"]
    assert lo <= hi and s["ratio_ci"]["n_boot"] == 1000


def test_summary_of_indefinite_quotients_uses_absolute_values():
    t = torch.tensor([-1e-3, 2e-3, float("nan")], dtype=torch.float64)
    r = torch.tensor([[0.5, -2.0], [1.0, 0.0], [4.0, -8.0]], dtype=torch.float64)
    s = quotient_summary(t, r, n_boot=50)
    assert s["tangent"]["n"] == 2 and s["tangent"]["frac_negative"] == 0.5  # NaN (undefined) left out
    assert s["random"]["n_zero"] == 1 and s["random"]["frac_negative"] == 2 / 6
    assert s["ratio_of_medians"] == pytest.approx(1e-3 / 1.0)  # lower medians of |q|
    assert s["random"]["q25_log10"] == pytest.approx(math.log10(0.5))
    assert s["log10_tangent"][2] is None and s["log10_random"][3] is None  # NaN and -inf -> None
    json.dumps(s, allow_nan=False)


def test_invariant_head_gives_zero_quotient_and_null_space_fraction_one():
    """Linear backbone z = A vec(x), brightness tangent t = A vec(x); a linear head whose kernel
    contains every image's t is exactly invariant along brightness."""
    x = images(2)
    d, k = 6, 3
    torch.manual_seed(3)
    bb = nn.Sequential(nn.Flatten(), nn.Linear(3 * H * W, d, bias=False)).double()
    t = bb(x).detach()  # (2, d): the brightness tangents at factor 1
    q, _ = torch.linalg.qr(torch.cat([t.T, torch.randn(d, d - 2, dtype=torch.float64)], 1))
    head = nn.Linear(d, k).double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(k, d - 2, dtype=torch.float64) @ q[:, 2:].T)  # kernel ⊇ span t
    res = tangent_metric_analysis(bb, head, x, ["brightness"], n_random=M)
    e = res["families"]["brightness"]
    assert all(v is None or v < -25 for v in e["head_G"]["log10_tangent"])
    assert all(v > -3 for v in e["head_G"]["log10_random"])
    assert e["head_G"]["p_below"] == 1.0 and e["end_to_end"]["p_below"] == 1.0
    null = e["fisher"]["head"]["null_space"]["1e-06"]
    assert null["tangent_mean"] == pytest.approx(1.0, abs=1e-12)
    assert null["tangent_mostly_null"] == 1.0 and null["random_mean"] < 1.0
    assert e["fisher"]["head"]["rank"]["1e-06"]["max"] == k
    assert e["fisher"]["chart"]["bound_holds"]["1e-06"] == 1.0
    assert e["backbone"]["p_below"] < 1.0  # the backbone is not invariant


def test_fisher_ranks_match_numpy_matrix_rank():
    x = images(3)
    d, k = 4, 5
    torch.manual_seed(4)
    low_rank = nn.Sequential(nn.Linear(d, 2, bias=False), nn.Tanh(), nn.Linear(2, k)).double()
    bb = Backbone().double()
    res = tangent_metric_analysis(bb, low_rank, x, ["contrast"], n_random=M)
    e = res["families"]["contrast"]["fisher"]
    pix_to_z = lambda y: bb(y)
    e_pix, e_z = directions(3, d)
    fam = get_family("contrast")
    for tol_key, tol in (("0.0001", 1e-4), ("1e-06", 1e-6), ("1e-08", 1e-8)):
        rh, rz, rhc, fr = [], [], [], []
        for i in range(3):
            xi_ = x[i:i + 1]
            jb = jacobian(lambda p: pix_to_z(p.view(1, 3, H, W)).squeeze(0), xi_.flatten())
            z = pix_to_z(xi_).squeeze(0)
            jh = jacobian(lambda v: low_rank(v.unsqueeze(0)).squeeze(0), z).detach()
            u = ((fam.apply(xi_, 1 + 1e-6) - fam.apply(xi_, 1 - 1e-6)) / 2e-6).flatten()
            jz = torch.cat([(jb @ u / u.norm())[:, None], jb @ e_pix[i].flatten(1).T], 1)
            for mat, acc in ((jh.T @ jh, rh), (jz.T @ jz, rz), ((jh @ jz).T @ (jh @ jz), rhc)):
                lam_max = np.linalg.eigvalsh(mat.detach().numpy()).max()
                acc.append(np.linalg.matrix_rank(mat.detach().numpy(), tol=tol * lam_max, hermitian=True))
            fr.append(null_space_fraction(jh, (jb @ u)[None], tol)[0] ** 2)
        assert rh == [2, 2, 2]
        assert e["head"]["rank"][tol_key] == {"median": float(np.median(rh)), "min": float(min(rh)),
                                              "max": float(max(rh)), "mean": float(np.mean(rh))}
        assert (e["chart"]["rank_z"][tol_key]["min"], e["chart"]["rank_z"][tol_key]["max"]) == (min(rz), max(rz))
        assert e["chart"]["rank_h"][tol_key]["max"] == max(rhc) == 2
        null = e["head"]["null_space"][tol_key]
        assert null["tangent_mean"] == pytest.approx(float(torch.stack(fr).mean()), abs=1e-9)


def test_batches_do_not_change_the_tangent_quotients():
    """3 images in batches of 2 (the last batch holds one image) against one batch of 3."""
    x, head = images(3), smooth_head().double()
    one = tangent_metric_analysis(Backbone(), head, x, ["blur"], n_random=2)["families"]["blur"]
    two = tangent_metric_analysis(Backbone(), head, x, ["blur"], n_random=2, batch_size=2)["families"]["blur"]
    for metric in ("backbone", "end_to_end", "head_G", "head_loss"):
        assert two[metric]["log10_tangent"] == pytest.approx(one[metric]["log10_tangent"], rel=1e-12)
        assert len(two[metric]["log10_random"]) == 6


class AttentionBackbone(nn.Module):
    """Self-attention over the H·W pixel tokens through F.scaled_dot_product_attention (as the ViTs)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.qkv, self.out = nn.Linear(3, 3 * 8), nn.Linear(8, 4)

    def forward(self, x):
        q, k, v = self.qkv(x.flatten(2).transpose(1, 2)).unsqueeze(1).chunk(3, dim=-1)
        return self.out(nn.functional.scaled_dot_product_attention(q, k, v).mean(dim=(1, 2)))


def test_attention_backbones_get_forward_mode_tangents():
    res = tangent_metric_analysis(AttentionBackbone(), smooth_head(), images(2), ["rotation"], n_random=2)
    assert res["families"]["rotation"]["tangent_check"]["rel_err_max"] < 1e-6


def test_backbone_only_and_json():
    x = (images(2) * 255).round().to(torch.uint8)
    res = tangent_metric_analysis(Backbone(), None, x, ["rotation", "blur"], n_random=2)
    for e in res["families"].values():
        assert e["head_G"] is None and e["head_loss"] is None and e["fisher"]["head"] is None
        assert e["backbone"]["tangent"]["n"] == 2 and e["backbone"]["random"]["n"] == 4
    assert res["protocol"]["xi0"] == {"rotation": 0.0, "blur": 1.0}
    json.dumps(res, allow_nan=False)


class ThreeD(nn.Module):
    def forward(self, z):
        return z.unsqueeze(-1)


@pytest.mark.parametrize("kwargs,match", [
    (dict(families=["rotate"]), "unknown augmentation family 'rotate'"),
    (dict(families="hue"), "non-empty list"),
    (dict(images=torch.rand(2, 1, H, W)), r"\(N, 3, H, W\)"),
    (dict(images=torch.rand(3, H, W)), r"\(N, 3, H, W\)"),
    (dict(images=torch.rand(2, 3, H, W) * 2), r"\[0, 1\] pixels"),
    (dict(head=ThreeD()), "head must return 2-D"),
    (dict(loss="vicreg"), "loss must be one of"),
    (dict(n_random=0), "n_random must be an int >= 1"),
    (dict(mean=MEAN), "both mean and std"),
    (dict(xi0={"rotation": 5.0}), "xi0 names families that are not analysed"),
])
def test_bad_input_raises_clear_value_errors(kwargs, match):
    args = dict(backbone=Backbone(), head=smooth_head(), images=images(2), families=["hue"])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        tangent_metric_analysis(args.pop("backbone"), args.pop("head"), args.pop("images"),
                                args.pop("families"), **args)
