"""The head's pullback metric per sample, G(z) = J_hᵀJ_h (d × d), through its last Linear layer.

It is the Fisher information the head output carries about z under y = h(z) + ε, ε ~ N(0, I)
(docs/paper.md §2 C7; headgeom.geometry.invariance.fisher). A head whose last map is linear, u = W y(z) + b
with W (k, m), has J_h = W J_y; with the thin QR factorisation W = Q R (R (m, m), formed once),

    G(z) = J_yᵀ WᵀW J_y = (R J_y)ᵀ (R J_y),

a Gram of an (m, d) matrix instead of the (k, d) Jacobian of the whole head. For DINO heads
(k = 65,536 after the L2-normalised bottleneck m = 256) this skips forming 65,536 × d Jacobians
per sample (d forward-mode passes through the 65,536-wide layer) and the k·d² product:
per sample d·k·(d + m) → d·m·(d + m) multiply-adds (k/m = 256× fewer at any d), besides the
d forward-mode passes through the layers before W.
Round-off stays that of a Gram of a formed Jacobian (Q is orthonormal). Heads whose last leaf
module is not an ``nn.Linear`` wider than it is deep (k > m), and plain callables, take the
direct path J_hᵀJ_h.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from headgeom.geometry.invariance.fisher import per_sample_jacobian
from headgeom.heads import ProjectionHead

__all__ = ["PullbackGram", "pullback_gram"]


def _leaves(fns: Sequence[Callable]) -> list[Callable]:
    """The maps of a composition in forward order, plain Sequentials and ProjectionHeads opened
    (ProjectionHead.forward is a width check, then ``self.layers(z)``)."""
    out: list[Callable] = []
    for f in fns:
        if isinstance(f, ProjectionHead):
            out.extend(_leaves(list(f.layers)))
        elif isinstance(f, nn.Sequential) and type(f).forward is nn.Sequential.forward:
            out.extend(_leaves(list(f)))
        else:
            out.append(f)
    return out


def _compose(fns: Sequence[Callable]) -> Callable[[Tensor], Tensor]:
    def fn(z: Tensor) -> Tensor:
        for f in fns:
            z = f(z)
        return z
    return fn


@dataclass(frozen=True)
class PullbackGram:
    """z (N, d) -> G (N, d, d). ``r`` is None on the direct path; ``path`` says which was taken."""

    pre: Callable[[Tensor], Tensor]
    r: Tensor | None
    path: str
    max_elements: int

    def __call__(self, z: Tensor) -> Tensor:
        if not isinstance(z, Tensor) or z.ndim != 2:
            raise ValueError(f"z must be (N, d) rows; got {getattr(z, 'shape', type(z).__name__)}")
        grams = []
        probe = self.pre(z[:1])
        width = probe.shape[-1] * z.shape[1]  # Jacobian entries per sample
        step = max(1, self.max_elements // width)
        for s in range(0, z.shape[0], step):
            jac = per_sample_jacobian(self.pre, z[s:s + step])  # (step, m or k, d)
            if self.r is not None:
                jac = self.r @ jac
            grams.append(jac.mT @ jac)
        return torch.cat(grams)


def pullback_gram(head: Callable | Sequence[Callable], max_elements: int = 2 ** 26) -> PullbackGram:
    """The per-sample G(z) = J_hᵀJ_h of ``head`` (a module, a callable, or a list composed in order).

    Row-wise heads only (eval-mode BatchNorm is row-wise). The last Linear's weight is read now:
    build it again after changing the head. ``max_elements`` caps the Jacobian entries formed at once.
    """
    fns = _leaves(list(head) if isinstance(head, Sequence) else [head])
    last = fns[-1] if fns else None
    if isinstance(last, nn.Linear) and last.weight.shape[0] > last.weight.shape[1]:
        with torch.no_grad():
            r = torch.linalg.qr(last.weight.detach(), mode="r").R  # (m, m): WᵀW = RᵀR
        return PullbackGram(_compose(fns[:-1]), r, f"last Linear {tuple(last.weight.shape)} via QR", max_elements)
    return PullbackGram(_compose(fns), None, "direct J_h^T J_h", max_elements)
