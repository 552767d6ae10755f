"""The measured facts of one analysis of ``loss ∘ head`` at z, frozen once measured.

:func:`measure_facts` measures, in this order: the head output u = h(z) and the residual gradient
ρ = ∇_u L (both checked finite; ρ by plain autograd, :func:`residual_gradient`); the head's chain (discovered and folded once per analysis copy,
:class:`~headgeom.geometry.engine.head_facts.HeadFacts`) and the guard that it reproduces u on the first
rows; whether the head is row-wise (a verified chain is, by construction) and whether the loss
Hessian is block-diagonal over samples (a declared form is checked against the exact HVP, which is
the probe too). What only some queries need is measured on first use and then kept, each a
``cached_property`` named in ``LAZY_FACTS``: the loss's declared, checked or discovered curvature,
its declared coupled blocks, the HVP closures of the operator path and the operand scale.
The strategies (:mod:`headgeom.geometry.engine.block_strategies`, :mod:`headgeom.geometry.engine.operator_path`)
read these facts and never write them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
from torch import Tensor, nn

from headgeom.objectives.declared import AnalysisLoss

from .head_function import PreparedHead, is_row_wise, non_finite_count
from .loss_curvature import LowRankCurvature, coupled_blocks_for, curvature_for
from .loss_discovery import discover_curvature, is_block_diagonal
from .chain import chain_output
from .sandwich import ChainProducts
from .operand_scale import OperandScale, measure_operand_scale
from .readings import hvp_fn, loss_hvp

LAZY_FACTS = ("declared_curvature", "loss_curvature", "coupled_blocks", "full_hvp", "contracted_hvp",
              "operand_scale")
GUARD_ROWS = 4  # rows on which a discovered chain must reproduce the head's output


@dataclass(frozen=True)
class Settings:
    """How an analysis computes (not what it measures): the reading of G and the block options."""

    reading: str
    max_dense: int
    chunk_size: int = 32
    block_strategy: str = "auto"
    discover_structure: bool = True


def check_finite(name: str, t: Tensor, hint: str) -> None:
    """A ValueError naming ``name`` and the count of its NaN/Inf entries, if it has any."""
    if bad := non_finite_count(t):
        raise ValueError(f"{name} has {bad} non-finite entries (NaN or Inf) of {t.numel()}; {hint}")


@dataclass(frozen=True, eq=False)
class AnalysisFacts:
    """What one analysis measured; build with :func:`measure_facts`."""

    head: PreparedHead
    loss: AnalysisLoss
    z: Tensor  # (N, d) in the analysis dtype
    settings: Settings
    u: Tensor  # (N, k) = h(z)
    rho: Tensor  # (N, k) = ∇_u L
    layers: list[nn.Module] | None  # the verified, affine-folded chain of the structured path, or None
    discovered_by: str  # "sequential", "traced" or "generic (<reason>)"
    row_wise_head: bool
    separable_loss: bool

    @property
    def n(self) -> int:
        return self.z.shape[0]

    @property
    def d(self) -> int:
        return self.z.shape[1]

    @property
    def k(self) -> int:
        return self.u.shape[1]

    @property
    def dim(self) -> int:
        return self.n * self.d

    @property
    def reading(self) -> str:
        return self.settings.reading

    def chain_products(self) -> ChainProducts:
        """The verified chain's shared weight products, kept with the analysis copy's facts."""
        return self.head.facts.chain_products(self.layers, self.d, self.z)

    def loss_hvp(self) -> Callable[[Tensor], Tensor]:
        """w ↦ ∇²_u L w under the reading."""
        return loss_hvp(self.loss, self.u, self.reading)

    # ------------------------------------------------------------------ measured on first use
    @cached_property
    def declared_curvature(self) -> LowRankCurvature | None:
        """The loss's declared low-rank blocks under the reading, checked against exact HVPs, or None."""
        return curvature_for(self.loss, self.u, self.reading)

    @cached_property
    def loss_curvature(self) -> tuple[LowRankCurvature | None, str]:
        """The separable loss's blocks in low-rank form and where they come from: declared
        (checked), else discovered (verified, :mod:`headgeom.geometry.engine.loss_discovery`) when the
        settings allow, else (None, "hvp")."""
        curv, how = self.declared_curvature, "declared-curvature"
        if curv is None and self.settings.discover_structure and self.separable_loss:
            curv, how = discover_curvature(self.loss_hvp(), self.u), "discovered-curvature"
        return curv, (how if curv is not None else "hvp")

    @cached_property
    def coupled_blocks(self) -> Tensor | None:
        """The loss's declared, checked diagonal blocks (N, k, k) under the reading, or None."""
        return coupled_blocks_for(self.loss, self.u, self.reading)

    @cached_property
    def full_hvp(self) -> Callable[[Tensor], Tensor]:
        """v ↦ ∇²_z L(h(z)) v on flat z (one closure: a fallback to reverse mode is found once)."""
        return hvp_fn(lambda zf: self.loss(self.head.fn(zf.reshape(self.n, self.d))), self.z.reshape(-1))

    @cached_property
    def contracted_hvp(self) -> Callable[[Tensor], Tensor]:
        """v ↦ M v: the Hessian of ⟨sg(ρ), h(z)⟩ on flat z."""
        return hvp_fn(lambda zf: (self.rho * self.head.fn(zf.reshape(self.n, self.d))).sum(), self.z.reshape(-1))

    @cached_property
    def operand_scale(self) -> OperandScale:
        """S = 1.1 · max_i ‖A_i‖₂ ‖J_i‖₂² (:mod:`headgeom.geometry.engine.operand_scale`)."""
        return measure_operand_scale(self.head.fn, self.z, self.u, self.loss, self.row_wise_head, self.separable_loss)


def residual_gradient(loss: AnalysisLoss, u: Tensor) -> Tensor:
    """ρ = ∇_u L at u by torch.autograd (no torch.func: see
    :func:`headgeom.geometry.engine.readings.autograd_loss_hvp`); a loss constant in u has ρ = 0."""
    with torch.enable_grad():
        x = u.detach().requires_grad_(True)
        value = loss(x)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ValueError("the loss must map the head output (N, k) to a scalar tensor")
        if not value.requires_grad:
            return torch.zeros_like(u)
        (rho,) = torch.autograd.grad(value.reshape(()), x, allow_unused=True)
    return torch.zeros_like(u) if rho is None else rho.detach()


def verified_chain(head: PreparedHead, z: Tensor, u: Tensor) -> tuple[list[nn.Module] | None, str]:
    """(the head's affine-folded chain when it reproduces u on the first rows, else None; how it was
    discovered or why there is none). Discovery and folding are per analysis copy (its HeadFacts);
    the check against u is per call and needs no Jacobian."""
    module = head.module
    if module is None:
        return None, "generic (a callable, not an nn.Module)"
    if head.train_mode_batchnorm:
        return None, "generic (BatchNorm in train mode couples the samples)"
    found = head.facts.chain(module, tuple(z.shape))
    if found.layers is None:
        return None, found.describe()
    rows = min(GUARD_ROWS, z.shape[0])
    with torch.no_grad():  # the values alone (the derivatives' autograd passes were half a small call)
        probe = chain_output(found.layers, z[:rows])
    # folding reassociates products: allow the dtype's rounding (1e-9 in float64, ~1e-3 in float32)
    rtol = max(1e-9, 1e4 * torch.finfo(z.dtype).eps)
    atol = rtol * float(u[:rows].abs().max()) + 1e-12
    if probe.shape == u[:rows].shape and torch.allclose(probe, u[:rows], rtol=rtol, atol=atol):
        return found.layers, found.describe()
    return None, f"generic (the {found.how} chain does not reproduce the head's output on the first rows)"


def measure_facts(head: PreparedHead, loss: AnalysisLoss, z: Tensor, settings: Settings) -> AnalysisFacts:
    """Every fact a query of ``loss ∘ head`` at ``z`` reads, measured once (see the module docstring)."""
    u = head.fn(z).detach()
    if u.ndim != 2 or u.shape[0] != z.shape[0]:
        raise ValueError(f"the head must map (N, d) to (N, k); it mapped {tuple(z.shape)} to {tuple(u.shape)}")
    check_finite("the head output u = h(z)", u, "check z and the head's weights")
    rho = residual_gradient(loss, u)
    check_finite("the residual gradient rho = dL/du", rho, "the loss is not differentiable here")
    layers, discovered_by = verified_chain(head, z, u)
    # a verified chain of Linear / eval-BatchNorm / element-wise layers is row-wise by construction
    row_wise = layers is not None or (not head.train_mode_batchnorm and is_row_wise(head.fn, z))
    n = z.shape[0]
    declared = loss.hessian_structure is not None
    if n < 2 or declared:
        separable = True
    else:  # ⌈log₂ N⌉ batched probes separate every pair of rows (headgeom.geometry.engine.loss_discovery)
        separable = is_block_diagonal(loss_hvp(loss, u, settings.reading), u)
    facts = AnalysisFacts(head, loss, z, settings, u, rho, layers, discovered_by, row_wise, separable)
    if declared and n >= 2:
        # a declared block-diagonal form is checked against the exact HVP of a random tangent on
        # every row now (curvature_for raises on a mismatch): that check is the separability probe
        _ = facts.declared_curvature
    return facts
