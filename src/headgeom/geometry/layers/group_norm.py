"""``nn.GroupNorm`` (and ``F.group_norm``) on rows: LayerNorm within each of G groups of channels.

On (N, C) input, GroupNorm splits each row's C channels into G consecutive groups of v = C/G and
normalises each group as LayerNorm does a row (docs/paper.md §1: M needs ∇²⟨g, y(x)⟩):
y_g = x̄_g/σ_g, x̄_g = x_g − mean(x_g), σ_g = √(|x̄_g|²/v + eps); γ, β per channel follow as a
:class:`~headgeom.geometry.layers.affine.ChannelAffine`, folded into the next Linear. J and S are
block-diagonal over the groups, each block LayerNorm's (:mod:`headgeom.geometry.layers.row_norm`):

    J_g = c_g (I − E_g E_gᵀ),  E_g = [1/√v, y_g/√v],  c_g = 1/σ_g
    S_g = β_g (I − f fᵀ) + V_g B_g V_gᵀ,  f = 1/√v,  V_g = [a_g, y_g],  a_g = g_g − mean(g_g),
          t_g = a_gᵀ y_g, β_g = −t_g c_g²/v,  B_g = c_g²/v [[0, −1], [−1, 3 t_g/v]]

so a product with J costs two projections per group, and pre S preᵀ is the weighted Gram
pre diag(β per channel) preᵀ plus a rank-3G correction.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..linalg.weighted_gram import symmetric_bmm, weighted_gram
from ..linalg.workspace import Workspace
from .affine import channel_affine
from .base import ChainLayer, LayerPass, RowSelection
from .registry import NotAChain, as_is, call_arguments, chain_layer, function_rule, module_rule


class GroupNormalize(nn.Module):
    """GroupNorm's normalisation of rows (N, C) in ``groups`` groups, without γ, β."""

    def __init__(self, groups: int, eps: float) -> None:
        super().__init__()
        self.groups, self.eps = groups, eps

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.groups, eps=self.eps)

    def extra_repr(self) -> str:
        return f"groups={self.groups}, eps={self.eps}"


class GroupNormPass(LayerPass):
    """The state over s rows, per group g: y (s, G, v), c = 1/σ (s, G); after :meth:`backward`, a, t."""

    def __init__(self, y: Tensor, c: Tensor, a: Tensor | None = None, t: Tensor | None = None) -> None:
        self.y4, self.c = y, c  # (s, G, v), (s, G)
        self.y = y.reshape(y.shape[0], -1)
        self.a, self.t = a, t

    @property
    def _v(self) -> int:
        return self.y4.shape[-1]

    def rows(self, sel: RowSelection) -> "GroupNormPass":
        pick = lambda x: None if x is None else x[sel]  # noqa: E731
        return GroupNormPass(self.y4[sel], self.c[sel], pick(self.a), pick(self.t))

    def _groups(self, x: Tensor) -> Tensor:
        return x.reshape(*x.shape[:-1], self.y4.shape[1], self._v)

    def backward(self, g: Tensor) -> Tensor:
        g4 = self._groups(g)
        self.a = g4 - g4.mean(dim=-1, keepdim=True)
        self.t = (self.a * self.y4).sum(dim=-1)  # = yᵀ g per group
        return ((self.a - self.y4 * (self.t / self._v)[..., None]) * self.c[..., None]).reshape(g.shape)

    def pull_jt(self, pre: Tensor) -> Tensor:
        """pre J (J is symmetric) for pre (d, w) shared or (s, d, w): per group, pre_g less its mean
        (computed once when pre is shared) less its projection on y_g (yᵀ1 = 0, so yᵀ(p − mean p) = yᵀp)."""
        s, groups, v = self.y4.shape
        p4 = self._groups(pre)
        centred = p4 - p4.mean(dim=-1, keepdim=True)
        along = torch.einsum("dgv,sgv->sdg" if pre.ndim == 2 else "sdgv,sgv->sdg", centred, self.y4)
        out = torch.addcmul(centred, self.y4[:, None], along[..., None], value=-1.0 / v)
        return out.mul_(self.c[:, None, :, None]).reshape(s, pre.shape[-2], -1)

    def _beta(self) -> Tensor:
        """β_g = −t_g c_g²/v (s, G)."""
        return -self.t * self.c * self.c / self._v

    def dense_jacobian(self) -> Tensor:
        s, groups, v = self.y4.shape
        eye = torch.eye(v, dtype=self.y.dtype, device=self.y.device)
        blocks = (eye - 1.0 / v - self.y4[..., :, None] * self.y4[..., None, :] / v) * self.c[..., None, None]
        return torch.stack([torch.block_diag(*b) for b in blocks])

    def dense_second(self) -> Tensor:
        s, groups, v = self.y4.shape
        eye = torch.eye(v, dtype=self.y.dtype, device=self.y.device)
        k = (self.c * self.c / v)[..., None, None]
        outer = lambda p, q: p[..., :, None] * q[..., None, :]  # noqa: E731
        blocks = (self._beta()[..., None, None] * (eye - 1.0 / v)
                  + k * (-(outer(self.a, self.y4) + outer(self.y4, self.a)) + 3.0 * self.t[..., None, None] / v
                         * outer(self.y4, self.y4)))
        return torch.stack([torch.block_diag(*b) for b in blocks])

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        """out (+)= pre S preᵀ = pre diag(β) preᵀ − Σ_g β_g (pre_g f)(pre_g f)ᵀ + Σ_g (pre_g V_g) B_g (pre_g V_g)ᵀ."""
        s, groups, v = self.y4.shape
        beta = self._beta()  # (s, G)
        beta_ch = beta.repeat_interleave(v, dim=1)  # (s, w)
        if pre.ndim == 2 and not accumulate:
            weighted_gram(pre, beta_ch, out=out, workspace=workspace)
        else:
            full = pre if pre.ndim == 3 else pre.expand(s, *pre.shape)
            symmetric_bmm(full * beta_ch[:, None, :], full, out, accumulate=accumulate)
        p4 = self._groups(pre)  # (…, d, G, v)
        pf = p4.sum(dim=-1) / math.sqrt(v)  # (…, d, G): pre_g f
        eq = "dgv,sgvq->sdgq" if pre.ndim == 2 else "sdgv,sgvq->sdgq"
        pv = torch.einsum(eq, p4, torch.stack([self.a, self.y4], dim=-1))  # (s, d, G, 2): pre_g V_g
        k = self.c * self.c / v  # (s, G)
        # B_g = k [[0, −1], [−1, 3t/v]]: pv B = k (−pv_y, −pv_a + 3t/v pv_y)
        pvb = torch.stack([-pv[..., 1], -pv[..., 0] + 3.0 * (self.t / v)[:, None, :] * pv[..., 1]], dim=-1)
        pvb = pvb * k[:, None, :, None]
        d = pre.shape[-2]
        left = torch.cat([pvb.reshape(s, d, 2 * groups), pf * -beta[:, None, :]], dim=-1)
        right = torch.cat([pv.reshape(s, d, 2 * groups), pf.expand(s, d, groups)], dim=-1)
        out.baddbmm_(left, right.transpose(1, 2))

    def sandwich(self, k: Tensor) -> Tensor:
        """Jᵀ K J = J K J (J symmetric) for K (s, w, w): J applied to K's rows, then to its columns."""
        kj = self.pull_jt(k)  # K J (rows of K are the "pre" of pull_jt)
        return self.pull_jt(kj.transpose(1, 2)).transpose(1, 2)


@chain_layer(GroupNormalize)
class GroupNormLayer(ChainLayer):
    """GroupNorm's normalisation: per group of channels, LayerNorm's."""

    def forward(self, x: Tensor) -> GroupNormPass:
        groups = self.module.groups
        s, w = x.shape
        x4 = x.reshape(s, groups, w // groups)
        xbar = x4 - x4.mean(dim=-1, keepdim=True)
        inv = torch.rsqrt((xbar * xbar).mean(dim=-1) + self.module.eps)  # 1/σ_g, the biased variance + eps
        return GroupNormPass(xbar * inv[..., None], inv)


module_rule(GroupNormalize)(as_is)


def _group_norm_layers(groups: int, width: int | None, weight: Tensor | None, bias: Tensor | None,
                       eps: float) -> list[nn.Module]:
    if not isinstance(groups, int) or groups < 1:
        raise NotAChain(f"GroupNorm with num_groups={groups!r}")
    if width is None:
        like = weight if weight is not None else bias
        width = None if like is None else like.shape[0]
    return [GroupNormalize(groups, float(eps)), *([] if width is None else channel_affine(weight, bias, width))]


@module_rule(nn.GroupNorm)
def _group_norm(module: nn.GroupNorm) -> list[nn.Module]:
    return _group_norm_layers(module.num_groups, module.num_channels, module.weight, module.bias, module.eps)


@function_rule(F.group_norm)
def _group_norm_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("num_groups", "weight", "bias", "eps"),
                       {"weight": None, "bias": None, "eps": 1e-5}, "F.group_norm")
    return _group_norm_layers(a["num_groups"], None, a["weight"], a["bias"], a["eps"])
