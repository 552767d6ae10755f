"""A controlled system for invariance by metric degeneracy (Prop 5.2, Thm 5.3; docs/paper.md §2 C6, C7).

Data manifold. Images are single-channel S×S *band-limited periodic patterns*,

    x(θ) = T_ξ b(c),   b(c) = P_band Σ_j c_j ψ_j,   θ = (c, ξ) ∈ R^p × [0, 1)^G,

with ψ_j periodic Gaussian bumps at fixed random positions (one per cell of a jittered grid, drawn
once per system), P_band the projection that zeroes every Fourier bin with |k| ≥ S/2 (the
Nyquist row and column), and T_ξ the circular translation by ξ (fractions of the side) applied
as a Fourier phase shift. On band-limited images T is an exact, smooth action of the torus group:
T_a T_b = T_{a+b}, T_0 = T_1 = id, so V_aug has the known dimension G (``"translation"``: x and y, G = 2;
``"translation_x"``: G = 1). The content c is *not* a shift-invariant parametrisation (bumps at
fixed positions), so θ ↦ x(θ) has rank p + G generically: the manifold dimension is known too.

Models. Backbone f: Flatten → Linear(S², hidden) → act → Linear(hidden, d); head h: a
:class:`headgeom.heads.ProjectionHead` d → head_hidden → k with the same smooth activation.
Both are trained jointly (or the head alone, ``train_backbone=False``) with a two-view
invariance objective (VICReg by default) on views T_ξ1 x, T_ξ2 x with independent uniform
shifts: seconds on one CPU core. ``trained_system`` caches the result per (spec, seed) in this
process, so C6 and C7 analyse the very same trained models.
"""
from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from headgeom.augment.families import AugmentationFamily
from headgeom.heads import HeadSpec, ProjectionHead
from headgeom.heads.activations import get_act
from headgeom.objectives import OBJECTIVES
from headgeom.rng import seeded

GROUPS: dict[str, tuple[str, ...]] = {"translation": ("x", "y"), "translation_x": ("x",)}
STAGES = ("before", "after")  # the models of a TrainedSystem: at initialisation and after training

__all__ = [
    "GROUPS", "STAGES", "InvarianceSpec", "TrainedSystem", "PatternManifold", "circular_shift", "shift_family",
    "build_models", "train_invariance", "trained_system", "invariance_gap",
]


@dataclass(frozen=True)
class InvarianceSpec:
    """Every setting of the controlled system (sizes, group, models, training)."""

    size: int = 12  # S, image side in pixels
    n_content: int = 6  # p, number of bumps (content parameters)
    bump_width: float = 0.12  # Gaussian bump std, fraction of the side
    group: str = "translation"  # a key of GROUPS
    hidden: int = 64  # backbone hidden width
    d: int = 16  # representation dim
    head_hidden: int = 32
    k: int = 16  # head output dim
    activation: str = "silu"  # smooth, so jvp tangents and metrics are meaningful everywhere
    objective: str = "vicreg"  # a two-view objective of headgeom.objectives
    train_backbone: bool = True
    n_train: int = 1024
    steps: int = 300
    batch: int = 128
    lr: float = 3e-3

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"unknown group {self.group!r}; choose one of {sorted(GROUPS)}")
        if self.objective not in OBJECTIVES or not OBJECTIVES[self.objective].two_view:
            two = sorted(n for n, s in OBJECTIVES.items() if s.two_view)
            raise ValueError(f"objective {self.objective!r} is not a two-view objective; choose one of {two}")
        for name in ("size", "n_content", "hidden", "d", "head_hidden", "k", "n_train", "steps", "batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"InvarianceSpec.{name} must be >= 1; got {getattr(self, name)}")
        if self.size < 4:
            raise ValueError(f"size must be >= 4 pixels to hold a band-limited pattern; got {self.size}")

    @property
    def dim_aug(self) -> int:
        """G = dim V_aug: the number of continuous group parameters."""
        return len(GROUPS[self.group])


# ----------------------------------------------------------------------------- the group action
def _frequencies(size: int, dtype: torch.dtype, device=None) -> tuple[Tensor, Tensor]:
    """Integer wave numbers (ky over rows (S,), kx over rfft columns (S//2+1,))."""
    ky = torch.fft.fftfreq(size, d=1.0 / size, dtype=dtype, device=device)
    kx = torch.fft.rfftfreq(size, d=1.0 / size, dtype=dtype, device=device)
    return ky, kx


def band_limit(x: Tensor) -> Tensor:
    """Zero every Fourier bin with |k_x| ≥ S/2 or |k_y| ≥ S/2 of images (..., S, S)."""
    size = x.shape[-1]
    ky, kx = _frequencies(size, x.dtype, x.device)
    keep = (ky.abs() < size / 2)[:, None] & (kx.abs() < size / 2)[None, :]
    return torch.fft.irfft2(torch.fft.rfft2(x) * keep, s=x.shape[-2:])


def circular_shift(x: Tensor, shift_x: Tensor | float = 0.0, shift_y: Tensor | float = 0.0) -> Tensor:
    """T_ξ x: circular translation of images (N, C, S, S) by (shift_x, shift_y) fractions of the side.

    shift_x moves content right (+columns), shift_y down (+rows); each a number or (N,).
    Exact and smooth in ξ on band-limited images (see :func:`band_limit`); a Fourier phase shift.
    """
    n, size = x.shape[0], x.shape[-1]
    if x.shape[-2] != size:
        raise ValueError(f"circular_shift needs square images; got shape {tuple(x.shape)}")
    sx = torch.as_tensor(shift_x, dtype=x.dtype, device=x.device).expand(n).reshape(n, 1, 1, 1)
    sy = torch.as_tensor(shift_y, dtype=x.dtype, device=x.device).expand(n).reshape(n, 1, 1, 1)
    ky, kx = _frequencies(size, x.dtype, x.device)
    phase = -2.0 * math.pi * (kx[None, None, None, :] * sx + ky[None, None, :, None] * sy)
    spec = torch.fft.rfft2(x) * torch.polar(torch.ones_like(phase), phase)
    return torch.fft.irfft2(spec, s=(size, size))


def shift_family(axis: str) -> AugmentationFamily:
    """The one-parameter subgroup ξ ↦ T_ξ along ``axis`` ('x' or 'y') as an AugmentationFamily,
    so :func:`headgeom.augment.families.tangent` differentiates it by jvp."""
    if axis == "x":
        fn = lambda x, xi: circular_shift(x, xi, 0.0)  # noqa: E731
    elif axis == "y":
        fn = lambda x, xi: circular_shift(x, 0.0, xi)  # noqa: E731
    else:
        raise ValueError(f"axis must be 'x' or 'y'; got {axis!r}")
    return AugmentationFamily(f"circular_shift_{axis}", fn, 0.0, (0.0, 1.0), "fraction of the side, periodic")


# ----------------------------------------------------------------------------- the data manifold
class PatternManifold:
    """θ = (c, ξ) ↦ x(θ) = T_ξ b(c), images (N, 1, S, S); bump positions fixed by ``seed``."""

    def __init__(self, spec: InvarianceSpec, seed: int, dtype: torch.dtype = torch.float32) -> None:
        self.spec = spec
        g = torch.Generator().manual_seed(1_000_003 * int(seed) + 17)
        size = spec.size
        # bumps on a jittered grid (one per cell of a ⌈√p⌉² grid), so that no two nearly coincide and
        # the manifold's Jacobian ∂x/∂θ stays well conditioned
        side = math.ceil(math.sqrt(spec.n_content))
        cells = torch.randperm(side * side, generator=g)[: spec.n_content]
        corner = torch.stack([cells % side, cells // side], dim=1).to(torch.float64)
        centres = (corner + 0.25 + 0.5 * torch.rand(spec.n_content, 2, generator=g, dtype=torch.float64)) / side
        grid = (torch.arange(size, dtype=torch.float64) + 0.5) / size
        # periodic distance on the unit torus, per axis
        dy = (grid[None, :] - centres[:, 1:2] + 0.5).remainder(1.0) - 0.5  # (p, S) rows
        dx = (grid[None, :] - centres[:, 0:1] + 0.5).remainder(1.0) - 0.5  # (p, S) columns
        w = spec.bump_width
        bumps = torch.exp(-(dy[:, :, None] ** 2 + dx[:, None, :] ** 2) / (2 * w * w))
        self.basis = band_limit(bumps).to(dtype)  # (p, S, S), ψ_j after P_band
        self.dtype = dtype

    @property
    def n_latent(self) -> int:
        return self.spec.n_content + self.spec.dim_aug

    def base(self, c: Tensor) -> Tensor:
        """b(c): (N, p) -> (N, 1, S, S), band-limited."""
        return torch.einsum("np,pij->nij", c.to(self.basis.dtype), self.basis).unsqueeze(1)

    def render(self, theta: Tensor) -> Tensor:
        """x(θ): (N, p + G) -> (N, 1, S, S); θ = (c, ξ_x[, ξ_y])."""
        p = self.spec.n_content
        if theta.ndim != 2 or theta.shape[1] != self.n_latent:
            raise ValueError(f"theta must be (N, {self.n_latent}) = (N, p + G); got {tuple(theta.shape)}")
        xi = theta[:, p:]
        sy = xi[:, 1] if xi.shape[1] > 1 else 0.0
        return circular_shift(self.base(theta[:, :p]), xi[:, 0], sy)

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """n latent points θ: c ~ N(0, I_p), ξ ~ U[0, 1)^G."""
        c = torch.randn(n, self.spec.n_content, generator=generator, dtype=self.dtype)
        xi = torch.rand(n, self.spec.dim_aug, generator=generator, dtype=self.dtype)
        return torch.cat([c, xi], dim=1)

    def act(self, x: Tensor, xi: Tensor) -> Tensor:
        """Apply the group element ξ (N, G) to images x (N, 1, S, S)."""
        sy = xi[:, 1] if xi.shape[1] > 1 else 0.0
        return circular_shift(x, xi[:, 0], sy)


# ----------------------------------------------------------------------------- models and training
def build_models(spec: InvarianceSpec, seed: int) -> tuple[nn.Module, ProjectionHead]:
    """Backbone f (images (N, 1, S, S) -> (N, d)) and head h ((N, d) -> (N, k)), float32, seeded with
    ``seed`` (the caller's random stream left as it was: :func:`headgeom.rng.seeded`)."""
    with seeded(int(seed)):
        backbone = nn.Sequential(nn.Flatten(), nn.Linear(spec.size ** 2, spec.hidden),
                                 get_act(spec.activation), nn.Linear(spec.hidden, spec.d))
        head = ProjectionHead(HeadSpec((spec.d, spec.head_hidden, spec.k), activation=spec.activation))
    return backbone, head


@dataclass(frozen=True)
class TrainedSystem:
    """The manifold, the models at initialisation and after training, and the training log.

    The modules are shared by every caller of :func:`trained_system`: copy before changing them.
    """

    spec: InvarianceSpec
    seed: int
    manifold: PatternManifold
    models: dict[str, tuple[nn.Module, ProjectionHead]]  # per STAGES ("before", "after"): (backbone, head), eval
    loss_first: float
    loss_last: float


def train_invariance(spec: InvarianceSpec, seed: int) -> TrainedSystem:
    """Train f and h with the two-view invariance objective; full-batch-free minibatch Adam."""
    manifold = PatternManifold(spec, seed)
    backbone, head = build_models(spec, seed)
    before = (copy.deepcopy(backbone).eval(), copy.deepcopy(head).eval())
    g = torch.Generator().manual_seed(7919 * int(seed) + 1)
    data = manifold.base(manifold.sample(spec.n_train, g)[:, :spec.n_content])  # (n, 1, S, S)
    loss_fn = OBJECTIVES[spec.objective].fn
    params = list(head.parameters()) + (list(backbone.parameters()) if spec.train_backbone else [])
    backbone.requires_grad_(spec.train_backbone)
    opt = torch.optim.Adam(params, lr=spec.lr)
    first = last = float("nan")
    for step in range(spec.steps):
        idx = torch.randint(0, spec.n_train, (min(spec.batch, spec.n_train),), generator=g)
        x = data[idx]
        xi1 = torch.rand(len(idx), spec.dim_aug, generator=g)
        xi2 = torch.rand(len(idx), spec.dim_aug, generator=g)
        loss = loss_fn(head(backbone(manifold.act(x, xi1))), head(backbone(manifold.act(x, xi2))))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"invariance training diverged at step {step} (loss {float(loss)}); "
                                     f"lower InvarianceSpec.lr (now {spec.lr})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 0:
            first = float(loss.detach())
        last = float(loss.detach())
    backbone.requires_grad_(True)
    models = dict(zip(STAGES, (before, (backbone.eval(), head.eval()))))
    return TrainedSystem(spec, int(seed), manifold, models, first, last)


@functools.lru_cache(maxsize=32)  # every system of a paper-preset run (20) stays cached for C7
def trained_system(spec: InvarianceSpec, seed: int) -> TrainedSystem:
    """:func:`train_invariance`, cached per (spec, seed) in this process (C6 and C7 share it)."""
    return train_invariance(spec, seed)


@torch.no_grad()
def invariance_gap(backbone: nn.Module, head: nn.Module | None, manifold: PatternManifold, theta: Tensor,
                   generator: torch.Generator) -> float:
    """Orbit spread / data spread of a feature map (head ∘ backbone, or the backbone if head is None).

    mean_i ‖F(T_ξ x_i) − F(x_i)‖² over one uniform random ξ per sample, divided by
    mean_{i≠j} ‖F(x_i) − F(x_j)‖² (= 2·trace of the feature covariance): 0 for an exactly
    invariant map, about 1 when shifts move features as far as changing the image does.
    """
    x = manifold.render(theta)
    feat = (lambda im: backbone(im)) if head is None else (lambda im: head(backbone(im)))  # noqa: E731
    f0 = feat(x)
    xi = torch.rand(x.shape[0], manifold.spec.dim_aug, generator=generator, dtype=x.dtype)
    f1 = feat(manifold.act(x, xi))
    orbit = (f1 - f0).pow(2).sum(dim=1).mean()
    spread = 2.0 * f0.var(dim=0, unbiased=True).sum()
    return float(orbit / spread) if float(spread) > 0 else float("nan")
