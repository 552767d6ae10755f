"""Parameter-gradient norms of the head and of the backbone, recorded by the training loop.

The paper's gradient-norm figure plots the norm of the loss gradient with respect to the head's and the
backbone's parameters over training (docs/paper.md §4 pitfall 7: a parameter-gradient norm, not the
residual ρ = ∇_u L). The loop records, at every step that writes a metrics line::

    grad_norm_head     = sqrt( Σ_{p ∈ head}     Σ_i (∂L/∂p_i)² )
    grad_norm_backbone = sqrt( Σ_{p ∈ backbone} Σ_i (∂L/∂p_i)² )

the global L2 norm over every parameter of the group, accumulated in float64. The groups are the
method's ``head_parameters()`` (projector and, for SimSiam/BYOL, predictor) and
``backbone_parameters()``, the trainable ones: the partition of the head/backbone update ratio
(:mod:`headgeom.tracking.updates`). EMA targets and teachers (BYOL, DINO) are not trained by
gradients and are in neither group: only the trained student's (online network's) head and
backbone count.

When: after ``loss.backward()`` and the method's ``before_optimizer_step`` (DINO's frozen last layer
has no gradient then and counts 0), before ``optimizer.step()``: the gradient the optimiser applies.
Under DDP the gradients are averaged over the processes when ``backward`` returns, so the norms are
those of the global batch's gradient, computed and logged by rank 0 only. The norms stay tensors on
the device until the loop reads its loss (one host-device sync per record, shared with the loss).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["GRAD_NORM_KEYS", "gradient_groups", "gradient_norms", "grad_norm"]

GRAD_NORM_KEYS = ("grad_norm_head", "grad_norm_backbone")


def grad_norm(params: Iterable[Tensor]) -> Tensor:
    """sqrt(Σ ‖p.grad‖²) over the parameters that have a gradient, as a 0-d float64 tensor on their
    device (no host sync); 0 when none has one."""
    grads = [p.grad.detach() for p in params if p.grad is not None]
    if not grads:
        return torch.zeros((), dtype=torch.float64)
    norms = torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64).to(grads[0].device) for g in grads])
    return torch.linalg.vector_norm(norms)


def gradient_groups(method: Any) -> dict[str, list[Tensor]] | None:
    """{"grad_norm_head": head parameters, "grad_norm_backbone": backbone parameters} of a method with
    ``head_parameters()`` and ``backbone_parameters()`` (every headgeom.methods method); None for a
    method without them (nothing is recorded then)."""
    if not (callable(getattr(method, "head_parameters", None))
            and callable(getattr(method, "backbone_parameters", None))):
        return None
    return {"grad_norm_head": list(method.head_parameters()),
            "grad_norm_backbone": list(method.backbone_parameters())}


def gradient_norms(groups: dict[str, Sequence[Tensor]]) -> dict[str, Tensor]:
    """{key: :func:`grad_norm` of its parameters}, 0-d tensors read when the record is written."""
    return {key: grad_norm(params) for key, params in groups.items()}
