"""DINO's cross-view distillation loss (Caron et al. 2021), as in facebookresearch/dino
main_dino.py DINOLoss.forward, without its state: the centre is an input, and its EMA update
lives with the teacher, not here (docs/paper.md §1, house rule 1 of docs/design.md#house-rules).

Teacher probabilities q = softmax((t − centre) / teacher_temp), detached; student
log-probabilities log p = log_softmax(s / student_temp); the loss averages, over all pairs
(teacher view i, student view v) with v ≠ i, the batch mean of Σ_k −q_k log p_k.
"""
from __future__ import annotations

from typing import Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_2d, check_positive
from headgeom.objectives.spec import ObjectiveSpec

Views = Union[Tensor, Sequence[Tensor]]


def _views(name: str, views: Views) -> list[Tensor]:
    """A stacked (V, N, K) tensor or a sequence of (N, K) tensors -> list of (N, K) tensors."""
    if isinstance(views, Tensor):
        if views.dim() != 3:
            raise ValueError(
                f"{name} given as one tensor must be stacked views (V, N, K); got shape "
                f"{tuple(views.shape)}. Pass a list of (N, K) tensors or stack them."
            )
        out = list(views.unbind(0))
    elif isinstance(views, (list, tuple)):
        out = [check_2d(f"{name}[{i}]", v) for i, v in enumerate(views)]
    else:
        raise TypeError(
            f"{name} must be a (V, N, K) tensor or a sequence of (N, K) tensors; got "
            f"{type(views).__name__}"
        )
    if not out:
        raise ValueError(f"{name} must hold at least one view; got none")
    return out


def _center(center: Tensor | None, like: Tensor) -> Tensor:
    """The centre as a detached (1, K) tensor (zeros when None)."""
    k = like.shape[1]
    if center is None:
        return torch.zeros(1, k, dtype=like.dtype, device=like.device)
    if not isinstance(center, Tensor):
        raise TypeError(f"center must be a tensor of shape (1, K) or (K,); got {type(center).__name__}")
    if tuple(center.shape) not in ((k,), (1, k)):
        raise ValueError(
            f"center must have shape (1, {k}) or ({k},) to match outputs with K = {k}; "
            f"got {tuple(center.shape)}"
        )
    return center.detach().reshape(1, k)


def teacher_probs(teacher: Tensor, center: Tensor | None = None, teacher_temp: float = 0.04) -> Tensor:
    """q = softmax((t − centre) / teacher_temp), detached; t (N, K) -> (N, K)."""
    t = check_2d("teacher", teacher)
    temp = check_positive("teacher_temp", teacher_temp)
    return F.softmax((t - _center(center, t)) / temp, dim=-1).detach()


def teacher_entropies(teacher: Views, center: Tensor | None = None,
                      teacher_temp: float = 0.04) -> tuple[Tensor, Tensor]:
    """(mean per-sample entropy of q, entropy of the batch-mean q), in nats, over every teacher
    view; q as :func:`teacher_probs`. DINO's two collapses read off them (Caron et al. 2021 §5.3):
    uniform outputs put both at log K, one dimension dominating puts both near 0; a working
    teacher has a low first and a high second (sharp per sample, spread over the batch)."""
    views = _views("teacher", teacher)
    low = views[0].dtype in (torch.float16, torch.bfloat16)  # autocast outputs: entropies in float32
    q = torch.cat([teacher_probs(t.float() if low else t, center, teacher_temp) for t in views])
    per_sample = -(q * torch.log(q.clamp_min(torch.finfo(q.dtype).tiny))).sum(dim=-1).mean()
    mean_q = q.mean(dim=0)
    marginal = -(mean_q * torch.log(mean_q.clamp_min(torch.finfo(q.dtype).tiny))).sum()
    return per_sample, marginal


def dino_pair(
    student: Tensor,
    teacher: Tensor,
    center: Tensor | None = None,
    student_temp: float = 0.1,
    teacher_temp: float = 0.04,
) -> Tensor:
    """One DINO term mean_i Σ_k −q_ik log p_ik for one student and one teacher view (N, K)."""
    s = check_2d("student", student)
    t = check_2d("teacher", teacher)
    if s.shape != t.shape:
        raise ValueError(
            f"student and teacher views must have the same shape (N, K); got student "
            f"{tuple(s.shape)} and teacher {tuple(t.shape)}"
        )
    st = check_positive("student_temp", student_temp)
    q = teacher_probs(t, center, teacher_temp)
    return torch.sum(-q * F.log_softmax(s / st, dim=-1), dim=-1).mean()


def dino_hessian_structure(
    student: Tensor,
    teacher: Tensor,
    center: Tensor | None = None,
    student_temp: float = 0.1,
    teacher_temp: float = 0.04,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-sample blocks of ∇²_s dino_pair(s, t) as (α, U, B, δ): diag(δ_i) + α_i I + U_i B_i U_iᵀ.

    With p_i = softmax(s_i / T_s) and Σ_k q_ik = 1, row i's term −Σ_k q_ik log p_ik has Hessian
    (diag p_i − p_i p_iᵀ) / T_s², and the batch mean divides by N: α = 0, δ_i = p_i/(N T_s²),
    U_i = p_i, B_i = −1/(N T_s²). The teacher, its centre and temperature do not enter.
    """
    s = check_2d("student", student)
    n = s.shape[0]
    st = check_positive("student_temp", student_temp)
    p = F.softmax(s / st, dim=-1)
    scale = 1.0 / (n * st * st)
    return (s.new_zeros(n), p[:, :, None], s.new_full((n, 1, 1), -scale), p * scale)


def dino(
    student: Views,
    teacher: Views,
    center: Tensor | None = None,
    student_temp: float = 0.1,
    teacher_temp: float = 0.04,
) -> Tensor:
    """DINO loss: student V_s views, teacher V_t views (each (N, K), or stacked (V, N, K)).

    The first V_t student views are the global views in the teacher's order, so the pair
    (teacher i, student i) is skipped. ``center`` is (1, K) or (K,), zero when None.
    """
    s_views = _views("student", student)
    t_views = _views("teacher", teacher)
    shape = s_views[0].shape
    for name, views in (("student", s_views), ("teacher", t_views)):
        for i, v in enumerate(views):
            if v.shape != shape:
                raise ValueError(
                    f"every view must have the same shape (N, K); got {name}[{i}] "
                    f"{tuple(v.shape)} and student[0] {tuple(shape)}"
                )
    if len(t_views) > len(s_views):
        raise ValueError(
            f"the student must see at least the teacher's {len(t_views)} global views; got "
            f"{len(s_views)} student views"
        )
    if len(s_views) < 2:
        raise ValueError(
            "DINO needs at least one (teacher i, student v) pair with v != i; got 1 student "
            "view and 1 teacher view. Give the student the other global view too."
        )
    st = check_positive("student_temp", student_temp)
    qs = [teacher_probs(t, center, teacher_temp) for t in t_views]
    log_ps = [F.log_softmax(s / st, dim=-1) for s in s_views]
    terms = [
        torch.sum(-q * log_p, dim=-1).mean()
        for i, q in enumerate(qs)
        for v, log_p in enumerate(log_ps)
        if v != i
    ]
    return torch.stack(terms).mean()


# one view: u is the student output of one global view and ``other`` the teacher output of the
# OTHER global view (N, K); the Hessian is diagonal + rank 1 (dino_hessian_structure)
SPECS = (ObjectiveSpec("dino", dino, two_view=False, batch_coupled=False, cosine=False,
                       description="DINO cross-entropy to the centred, sharpened, detached teacher "
                                   "(facebookresearch/dino DINOLoss); centre update kept apart",
                       one_view=dino_pair, hessian_structure=dino_hessian_structure),)
