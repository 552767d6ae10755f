"""MoCo v3's contrastive loss (Chen, Xie, He 2021), as in facebookresearch/moco-v3 moco/builder.py
``MoCo.contrastive_loss``: queries against the keys of a momentum encoder, no queue.

Queries q (the online branch after its predictor) and keys k (the momentum encoder's projector
output, no gradient) are L2-normalised rows (F.normalize, dim=1); logits = q̂ k̂ᵀ / T (N, N),
the positive of query i is key i and the other N − 1 keys of the batch are its negatives, and
the cross-entropy is multiplied by 2T (the official code's ``* (2 * self.T)``, which keeps the
gradient's scale independent of T). Training symmetrises it over the two views:
ctr(q1, k2) + ctr(q2, k1) (:func:`mocov3_symmetric`). T = 0.2 (the paper's ViT setting,
``--moco-t=.2``; the builder's default is 1.0).

The keys are stop-gradient, so as a function of its queries the loss is separable: row i's term
depends on q_i alone and ∇²_q L is block-diagonal over samples. Its blocks in closed form
(:func:`mocov3_hessian_structure`), with r = ‖q_i‖, x = q_i/r, K̂ the (N, k) normalised keys,
p_i = softmax(K̂ x / T), m_i = K̂ᵀ p_i and the batch mean's 1/N:

    in x:    H^x_i = 2/(N T) · K̂ᵀ (diag p_i − p_i p_iᵀ) K̂,      g_i = ∂L/∂x = 2/N · (m_i − k̂_i)
    in q_i:  H_i = J_i H^x_i J_i − (1/r²) [x g_iᵀ + g_i xᵀ + (g_iᵀx)(I − 3 x xᵀ)],  J_i = (I − x xᵀ)/r

(the normalisation's Jacobian and curvature, as in
:func:`headgeom.objectives.contrastive.nt_xent_diagonal_blocks`), i.e. α_i I + U_i B_i U_iᵀ with
α_i = −g_iᵀx/r², U_i = [J_i K̂ᵀ, x, g_i] (k, N + 2) and B_i = blockdiag(2/(N T) (diag p_i − p_i p_iᵀ),
[[3 g_iᵀx/r², −1/r²], [−1/r², 0]]).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_pair, check_positive
from headgeom.objectives.spec import ObjectiveSpec

__all__ = ["SPECS", "mocov3", "mocov3_diagonal_blocks", "mocov3_hessian_structure", "mocov3_symmetric"]


def _check(q: Tensor, k: Tensor, temperature: float) -> tuple[Tensor, Tensor, float]:
    """The inputs of every function here, checked: (q, detached k, T)."""
    q, k = check_pair("q", q, "k", k)
    check_batch("mocov3", q)
    return q, k.detach(), check_positive("temperature", temperature)


def mocov3(q: Tensor, k: Tensor, temperature: float = 0.2) -> Tensor:
    """2T · mean_i CE(q̂_i k̂ᵀ / T, i): queries q (N, D) against stop-gradient keys k (N, D) -> scalar."""
    q, k, t = _check(q, k, temperature)
    logits = F.normalize(q, dim=1) @ F.normalize(k, dim=1).T / t  # (N, N)
    return 2.0 * t * (torch.logsumexp(logits, dim=1) - torch.diagonal(logits)).mean()


def mocov3_symmetric(q1: Tensor, q2: Tensor, k1: Tensor, k2: Tensor, temperature: float = 0.2) -> Tensor:
    """MoCo v3's training loss mocov3(q1, k2) + mocov3(q2, k1): each view's queries against the
    other view's keys (builder.py ``MoCo.forward``)."""
    return mocov3(q1, k2, temperature) + mocov3(q2, k1, temperature)


def mocov3_hessian_structure(q: Tensor, k: Tensor, temperature: float = 0.2) -> tuple[Tensor, Tensor, Tensor]:
    """The per-sample blocks of ∇²_q :func:`mocov3` (q, k) as (alpha (N,), U (N, D, N + 2), B (N, N + 2, N + 2)):
    α_i I + U_i B_i U_iᵀ (module docstring). Cost O(N² D); tested against torch.func.hessian."""
    q, k, t = _check(q, k, temperature)
    n, d = q.shape
    r = q.norm(dim=1).clamp_min(1e-12)  # F.normalize's eps
    x = q / r[:, None]  # (N, D)
    keys = F.normalize(k, dim=1)  # (N, D)
    p = torch.softmax(x @ keys.T / t, dim=1)  # (N, N): p[i, j] = softmax over keys j of query i
    g = (2.0 / n) * (p @ keys - keys)  # (N, D): ∂L/∂x_i
    s = (g * x).sum(dim=1)  # (N,): g_iᵀ x_i
    proj_keys = (keys.T[None] - x[:, :, None] * (x @ keys.T)[:, None, :]) / r[:, None, None]  # (N, D, N): J_i K̂ᵀ
    U = torch.cat([proj_keys, x[:, :, None], g[:, :, None]], dim=2)  # (N, D, N + 2)
    B = q.new_zeros(n, n + 2, n + 2)
    B[:, :n, :n] = (2.0 / (n * t)) * (torch.diag_embed(p) - p[:, :, None] * p[:, None, :])
    inv_r2 = 1.0 / r**2
    B[:, n, n] = 3.0 * s * inv_r2
    B[:, n, n + 1] = -inv_r2
    B[:, n + 1, n] = -inv_r2
    return -s * inv_r2, U, B


def mocov3_diagonal_blocks(q: Tensor, k: Tensor, temperature: float = 0.2) -> Tensor:
    """The (N, D, D) blocks [∇²_q L]_ii of :func:`mocov3` (q, k), keys fixed: α_i I + U_i B_i U_iᵀ of
    :func:`mocov3_hessian_structure` written out (the whole Hessian, the loss being separable in q)."""
    alpha, U, B = mocov3_hessian_structure(q, k, temperature)
    eye = torch.eye(q.shape[1], dtype=q.dtype, device=q.device)
    return alpha[:, None, None] * eye + U @ B @ U.transpose(1, 2)


SPECS = (ObjectiveSpec("mocov3", mocov3, two_view=False, batch_coupled=False, cosine=False,
                       description="MoCo v3 InfoNCE of queries against momentum keys, in-batch negatives, "
                                   "x 2T, T=0.2 (facebookresearch/moco-v3 builder.py)",
                       hessian_structure=mocov3_hessian_structure, diagonal_blocks=mocov3_diagonal_blocks),)
