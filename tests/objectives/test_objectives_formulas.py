"""Each objective against an independent float64 formula (tests/objectives_reference.py).

Inputs are chosen so that the conventions matter: per-feature scales straddle 1 (VICReg's
hinge is active on some features only), N is small (N vs N − 1 and unbiased vs biased
variance differ by ≥ 20 %), and large eps values separate eps-inside-sqrt from eps-outside.
Tolerance: rtol 1e-10 (float64 round-off only).
"""
import numpy as np
import pytest
import torch

from headgeom.objectives import (
    barlow_twins, batch_standardize, dino, info_nce, mse_to_target, negative_cosine, nt_xent,
    simsiam_loss, teacher_entropies, vicreg,
)
from objectives_reference import (
    barlow_ref, dino_ref, info_nce_ref, teacher_entropies_ref, mse_ref, negative_cosine_ref, nt_xent_ref, vicreg_ref,
)

DT = torch.float64
RTOL = 1e-10


def pair(n=5, d=4, seed=0, scales=(0.3, 0.6, 1.8, 3.0)):
    g = torch.Generator().manual_seed(seed)
    s = torch.tensor(scales[:d], dtype=DT)
    a = torch.randn(n, d, generator=g, dtype=DT) * s + 0.7
    b = a + 0.5 * torch.randn(n, d, generator=g, dtype=DT) * s
    return a, b


def close(x: torch.Tensor, ref: float) -> None:
    assert x.dtype == DT and x.shape == ()
    assert abs(x.item() - ref) <= RTOL * max(1.0, abs(ref)), (x.item(), ref)


@pytest.mark.parametrize("t", [0.5, 0.1, 2.0])
def test_nt_xent_matches_loop_reference(t):
    a, b = pair()
    close(nt_xent(a, b, temperature=t), nt_xent_ref(a.numpy(), b.numpy(), t))


def test_nt_xent_has_2n_minus_2_negatives_and_is_symmetric():
    a, b = pair(n=3)
    t = 0.5
    ref = nt_xent_ref(a.numpy(), b.numpy(), t)
    close(nt_xent(a, b, t), ref)
    close(nt_xent(b, a, t), ref)
    # The variant that keeps the self-similarity exp(1/T) in each denominator is far off,
    # so the reference check above separates the two conventions.
    z = torch.nn.functional.normalize(torch.cat([a, b]), dim=1)
    logits = z @ z.T / t
    pos = torch.cat([torch.diagonal(logits, 3), torch.diagonal(logits, -3)])
    with_self = (torch.logsumexp(logits, dim=1) - pos).mean().item()
    assert abs(with_self - ref) > 0.05


@pytest.mark.parametrize("t", [0.1, 0.7])
def test_info_nce_matches_loop_reference(t):
    a, b = pair(n=6)
    close(info_nce(a, b, temperature=t), info_nce_ref(a.numpy(), b.numpy(), t))
    # One-directional: anchors from a only, so swapping the views changes the value.
    assert abs(info_nce(a, b, t).item() - info_nce(b, a, t).item()) > 1e-6


def test_negative_cosine_and_simsiam_match_reference():
    p1, z2 = pair(seed=1)
    p2, z1 = pair(seed=2)
    close(negative_cosine(p1, z2), negative_cosine_ref(p1.numpy(), z2.numpy()))
    ref = 0.5 * (negative_cosine_ref(p1.numpy(), z2.numpy()) + negative_cosine_ref(p2.numpy(), z1.numpy()))
    close(simsiam_loss(p1, p2, z1, z2), ref)


def test_mse_to_target_matches_reference():
    u, c = pair(seed=3)
    close(mse_to_target(u, c), mse_ref(u.numpy(), c.numpy()))


@pytest.mark.parametrize("kw", [{}, {"sim_coeff": 1.0, "std_coeff": 3.0, "cov_coeff": 0.5},
                                {"eps": 0.5}])
def test_vicreg_matches_numpy_reference(kw):
    a, b = pair(n=5)
    ref_kw = {"sim": kw.get("sim_coeff", 25.0), "std": kw.get("std_coeff", 25.0),
              "cov": kw.get("cov_coeff", 1.0), "eps": kw.get("eps", 1e-4)}
    close(vicreg(a, b, **kw), vicreg_ref(a.numpy(), b.numpy(), **ref_kw))


def test_vicreg_hinge_is_active_on_some_features_only():
    a, _ = pair(n=50)
    std = a.var(dim=0).sqrt()
    assert (std < 1).any() and (std > 1).any()  # so the reference check exercises relu


@pytest.mark.parametrize("kw", [{}, {"lambd": 0.3}, {"eps": 0.5}])
def test_barlow_twins_matches_loop_reference(kw):
    a, b = pair(n=5)
    close(barlow_twins(a, b, **kw), barlow_ref(a.numpy(), b.numpy(), **kw))


def test_batch_standardize_is_batchnorm1d_in_train_mode():
    a, _ = pair(n=7)
    for eps in (1e-5, 0.3):
        bn = torch.nn.BatchNorm1d(4, affine=False, eps=eps).to(DT).train()
        torch.testing.assert_close(batch_standardize(a, eps), bn(a), rtol=1e-12, atol=1e-12)


def dino_views(v_s=4, v_t=2, n=3, k=5, seed=4):
    g = torch.Generator().manual_seed(seed)
    s = [torch.randn(n, k, generator=g, dtype=DT) for _ in range(v_s)]
    t = [torch.randn(n, k, generator=g, dtype=DT) * 0.2 for _ in range(v_t)]
    c = torch.randn(1, k, generator=g, dtype=DT) * 0.1
    return s, t, c


@pytest.mark.parametrize("v_s,v_t", [(2, 2), (4, 2), (3, 1)])
def test_dino_matches_pair_loop_reference(v_s, v_t):
    s, t, c = dino_views(v_s, v_t)
    ref = dino_ref([x.numpy() for x in s], [x.numpy() for x in t], c.numpy()[0])
    close(dino(s, t, c), ref)
    close(dino(torch.stack(s), torch.stack(t), c[0]), ref)  # stacked views, centre (K,)


def test_dino_temperatures_and_default_zero_centre():
    s, t, _ = dino_views()
    ref = dino_ref([x.numpy() for x in s], [x.numpy() for x in t], np.zeros(5), ts=0.2, tt=0.07)
    close(dino(s, t, student_temp=0.2, teacher_temp=0.07), ref)


def test_teacher_entropies_match_reference_and_read_both_collapses():
    _, t, c = dino_views(2, 2)
    per, marg = teacher_entropies(t, c, 0.07)
    ref = teacher_entropies_ref([x.numpy() for x in t], c.numpy()[0], tt=0.07)
    close(per, ref[0])
    close(marg, ref[1])
    n, k = 8, 8
    uniform = [torch.zeros(n, k, dtype=DT)] * 2  # every output equal: q uniform
    close(teacher_entropies(uniform)[0], np.log(k))
    close(teacher_entropies(uniform)[1], np.log(k))
    one_dim = [torch.zeros(n, k, dtype=DT).index_fill_(1, torch.tensor([3]), 5.0)] * 2
    assert all(float(h) < 1e-40 for h in teacher_entropies(one_dim))  # one dimension dominates
    spread = [torch.eye(k, dtype=DT) * 5.0] * 2  # sharp per sample, each on its own dimension
    per, marg = teacher_entropies(spread)
    assert float(per) < 1e-40
    close(marg, np.log(k))
