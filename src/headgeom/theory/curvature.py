"""Riemann curvature of a metric given as a function x ↦ g(x), by two independent routes (Prop 3.3).

docs/paper.md §2 C2: the loss metric g_L(u) = ∇²_u L(u) restricted to a slice u(x) = u0 + B x
(B (k, m) orthonormal columns) is the (m, m) metric g(x) = Bᵀ ∇²_u L(u0 + B x) B. If it has
nonzero Riemann curvature, no change of coordinates (no head) makes it constant, and in
particular no constant W makes Wᵀ g(x) W = I on a neighbourhood.

Conventions (index order of every array, a..e in 0..m−1):

- ``dg[a, b, c] = ∂_c g_ab``, ``d2g[a, b, c, e] = ∂_c ∂_e g_ab``.
- ``gamma[a, b, c] = Γ^a_bc = ½ g^ad (∂_b g_dc + ∂_c g_db − ∂_d g_bc)`` (Levi-Civita).
- ``dgamma[a, b, c, e] = ∂_e Γ^a_bc``.
- ``R[a, b, c, d] = R^a_bcd = ∂_c Γ^a_db − ∂_d Γ^a_cb + Γ^a_ce Γ^e_db − Γ^a_de Γ^e_cb``,
  Ricci R_bd = R^a_bad, scalar S = g^bd R_bd; with this sign the round sphere of radius r has
  Gaussian curvature K = R_0101 / det g = +1/r² and S = 2/r².

Routes: ``curvature_exact`` takes Γ from a ``jacfwd`` of g and ∂Γ from one more ``jacfwd``
(third and fourth derivatives of L); ``curvature_fd`` takes ∂g and ∂²g from central finite
differences of g (order 2 or 4) and ∂Γ from the product rule. Both share only ``riemann``.
The Levi-Civita formulas hold for any nondegenerate symmetric g; ``is_positive_definite``
says whether g is a Riemannian metric at a point.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.func import jacfwd, vmap

from headgeom.geometry.engine.readings import check_reading, loss_hvp

Metric = Callable[[Tensor], Tensor]  # x (m,) -> g(x) (m, m)

# central-difference weights {offset: weight}: first derivative (·/h) and second (·/h²)
_D1 = {2: {-1: -0.5, 1: 0.5}, 4: {-2: 1 / 12, -1: -8 / 12, 1: 8 / 12, 2: -1 / 12}}
_D2 = {2: {-1: 1.0, 0: -2.0, 1: 1.0}, 4: {-2: -1 / 12, -1: 16 / 12, 0: -30 / 12, 1: 16 / 12, 2: -1 / 12}}


@dataclass(frozen=True)
class Curvature:
    """Curvature at one point x (m,): g (m, m), gamma (m, m, m), dgamma and riemann (m, m, m, m)."""

    g: Tensor
    gamma: Tensor
    dgamma: Tensor
    riemann: Tensor

    @property
    def ricci(self) -> Tensor:  # (m, m), R_bd = R^a_bad
        return torch.einsum("abad->bd", self.riemann)

    @property
    def scalar(self) -> float:
        return float(torch.einsum("bd,bd->", torch.linalg.inv(self.g), self.ricci))

    @property
    def riemann_lowered(self) -> Tensor:  # R_abcd = g_ae R^e_bcd
        return torch.einsum("ae,ebcd->abcd", self.g, self.riemann)

    @property
    def gaussian(self) -> float:
        """K = R_0101 / det g (m = 2 only)."""
        if self.g.shape[0] != 2:
            raise ValueError(f"the Gaussian curvature is defined for m = 2; this metric has m = {self.g.shape[0]}")
        return float(self.riemann_lowered[0, 1, 0, 1] / torch.linalg.det(self.g))

    def frame_riemann(self, w: Tensor) -> Tensor:
        """R_abcd in the frame of w's columns (e.g. a g-orthonormal W = g^{-1/2}): R_pqrs W_pa W_qb W_rc W_sd."""
        return torch.einsum("pqrs,pa,qb,rc,sd->abcd", self.riemann_lowered, w, w, w, w)

    def cancellation(self) -> float:
        """max|R| / (max|∂Γ| + max|Γ|²): how far R stands above the round-off of its own terms (0 if flat)."""
        scale = float(self.dgamma.abs().max() + self.gamma.abs().max() ** 2)
        return float(self.riemann.abs().max()) / scale if scale > 0 else 0.0


def _check_metric_value(g: Tensor, x: Tensor) -> None:
    m = x.shape[0]
    if g.shape != (m, m):
        raise ValueError(f"the metric at x of shape {tuple(x.shape)} must be ({m}, {m}); got {tuple(g.shape)}")


def _check_point(x: Tensor) -> Tensor:
    if not isinstance(x, Tensor) or x.ndim != 1 or x.shape[0] < 2:
        raise ValueError(f"x must be a 1-d tensor of m >= 2 slice coordinates; got {getattr(x, 'shape', x)!r}")
    if x.dtype != torch.float64:
        raise TypeError(f"curvature needs float64 coordinates (fourth derivatives); got {x.dtype}. Use x.double()")
    return x


def christoffel(g: Tensor, dg: Tensor) -> Tensor:
    """Γ^a_bc (m, m, m) from g (m, m) and dg[a, b, c] = ∂_c g_ab."""
    lower = 0.5 * (dg.permute(0, 2, 1) + dg - dg.permute(2, 0, 1))  # Γ_dbc (d, b, c)
    return torch.einsum("ad,dbc->abc", torch.linalg.inv(g), lower)


def christoffel_derivative(g: Tensor, dg: Tensor, d2g: Tensor) -> Tensor:
    """∂_e Γ^a_bc as [a, b, c, e], by the product rule, from g, dg and d2g[a, b, c, e] = ∂_c ∂_e g_ab."""
    ginv = torch.linalg.inv(g)
    lower = 0.5 * (dg.permute(0, 2, 1) + dg - dg.permute(2, 0, 1))  # (d, b, c)
    dlower = 0.5 * (d2g.permute(0, 2, 1, 3) + d2g - d2g.permute(2, 0, 1, 3))  # (d, b, c, e)
    dginv = -torch.einsum("ap,pqe,qd->ade", ginv, dg, ginv)
    return torch.einsum("ade,dbc->abce", dginv, lower) + torch.einsum("ad,dbce->abce", ginv, dlower)


def riemann(gamma: Tensor, dgamma: Tensor) -> Tensor:
    """R^a_bcd (m, m, m, m) = ∂_c Γ^a_db − ∂_d Γ^a_cb + Γ^a_ce Γ^e_db − Γ^a_de Γ^e_cb."""
    return (torch.einsum("adbc->abcd", dgamma) - torch.einsum("acbd->abcd", dgamma)
            + torch.einsum("ace,edb->abcd", gamma, gamma) - torch.einsum("ade,ecb->abcd", gamma, gamma))


def curvature_exact(metric: Metric, x: Tensor) -> Curvature:
    """Route 1: Γ from jacfwd(metric), ∂Γ from jacfwd of that (autograd third and fourth derivatives)."""
    x = _check_point(x)
    _check_metric_value(metric(x), x)

    def gamma_at(y: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        g = metric(y)
        gamma = christoffel(g, jacfwd(metric)(y))
        return gamma, (gamma, g)

    dgamma, (gamma, g) = jacfwd(gamma_at, has_aux=True)(x)  # one pass: ∂Γ, Γ and g
    gamma, dgamma = gamma.detach(), dgamma.detach()
    return Curvature(g=g.detach(), gamma=gamma, dgamma=dgamma, riemann=riemann(gamma, dgamma))


def metric_jets_fd(metric: Metric, x: Tensor, h: float, order: int = 4) -> tuple[Tensor, Tensor, Tensor]:
    """(g, dg, d2g) at x by central differences of step h and truncation order 2 or 4.

    ∂_c g uses the 1-d stencil of _D1; ∂_c² g the 1-d stencil of _D2; mixed ∂_c ∂_e g (c ≠ e)
    the tensor product of two first-derivative stencils. All points are evaluated in one vmap.
    Error: O(h^order) truncation plus O(eps·|g| / h²) round-off.
    """
    x = _check_point(x)
    if order not in _D1:
        raise ValueError(f"order must be 2 or 4 (truncation order of the central differences); got {order!r}")
    if not (isinstance(h, (int, float)) and h > 0):
        raise ValueError(f"the finite-difference step h must be a positive number; got {h!r}")
    m = x.shape[0]
    terms: dict[tuple, list[tuple[tuple, float]]] = {}  # derivative key -> [(offset, weight)]
    for c in range(m):
        terms[(c,)] = [(((c, p),), w / h) for p, w in _D1[order].items()]
        terms[(c, c)] = [(((c, p),), w / h ** 2) for p, w in _D2[order].items()]
        for e in range(c + 1, m):
            terms[(c, e)] = [(((c, p), (e, q)), wp * wq / h ** 2)
                             for (p, wp), (q, wq) in itertools.product(_D1[order].items(), repeat=2)]
    offsets = sorted({off for stencil in terms.values() for off, _ in stencil} | {()})
    index = {off: i for i, off in enumerate(offsets)}
    steps = torch.zeros(len(offsets), m, dtype=x.dtype)
    for off, i in index.items():
        for axis, p in off:
            steps[i, axis] += p * h
    gs = vmap(metric)(x + steps)  # (P, m, m)
    g = gs[index[()]]
    _check_metric_value(g, x)

    def combine(key: tuple) -> Tensor:
        return sum(w * gs[index[off]] for off, w in terms[key])

    dg = torch.stack([combine((c,)) for c in range(m)], dim=-1)
    d2g = torch.empty(m, m, m, m, dtype=x.dtype)
    for c in range(m):
        for e in range(c, m):
            d2g[:, :, c, e] = d2g[:, :, e, c] = combine((c, e))
    return g, dg, d2g


def curvature_fd(metric: Metric, x: Tensor, h: float, order: int = 4) -> Curvature:
    """Route 2: finite-difference jets of g, Γ and ∂Γ by the product rule, then ``riemann``."""
    g, dg, d2g = metric_jets_fd(metric, x, h, order)
    gamma = christoffel(g, dg)
    dgamma = christoffel_derivative(g, dg, d2g)
    return Curvature(g=g, gamma=gamma, dgamma=dgamma, riemann=riemann(gamma, dgamma))


def route_difference(a: Curvature, b: Curvature) -> tuple[float, float | None]:
    """(max|R_a − R_b|, that divided by max|R_a|; None when R_a is exactly zero)."""
    diff = float((a.riemann - b.riemann).abs().max())
    ref = float(a.riemann.abs().max())
    return diff, (diff / ref if ref > 0 else None)


def slice_metric(loss: Callable[[Tensor], Tensor], u0: Tensor, basis: Tensor, reading: str = "ambient") -> Metric:
    """x (m,) ↦ Bᵀ ∇²_u L(u0 + B x) B (m, m) under a loss-Hessian reading (headgeom.geometry.engine.readings).

    loss: u (N, K) -> scalar; u0 (N, K); basis B (N·K, m) with orthonormal columns, so the slice
    coordinates x measure Euclidean distance in u. Built from HVPs, differentiable by torch.func.
    """
    check_reading(reading)
    if basis.ndim != 2 or basis.shape[0] != u0.numel():
        raise ValueError(f"basis must be (N*K, m) = ({u0.numel()}, m) for u0 of shape {tuple(u0.shape)}; "
                         f"got {tuple(basis.shape)}")
    gram = basis.T @ basis
    if not torch.allclose(gram, torch.eye(basis.shape[1], dtype=basis.dtype), atol=1e-10):
        raise ValueError("basis columns must be orthonormal (Bᵀ B = I); orthonormalise with torch.linalg.qr")

    def metric(x: Tensor) -> Tensor:
        u = u0 + (basis @ x).reshape(u0.shape)
        hvp = loss_hvp(loss, u, reading)
        cols = vmap(lambda b: hvp(b.reshape(u0.shape)).reshape(-1))(basis.T)  # (m, N·K): H b_j
        g = cols @ basis
        return 0.5 * (g + g.T)

    return metric


def random_slice_basis(k: int, m: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    """B (k, m) with orthonormal columns, Haar-distributed (QR of a Gaussian matrix, signs fixed)."""
    if not 2 <= m <= k:
        raise ValueError(f"slice dimension m must satisfy 2 <= m <= k = {k}; got m = {m}")
    q, r = torch.linalg.qr(torch.randn(k, m, generator=generator, dtype=dtype))
    return q * torch.sign(torch.diagonal(r))


def is_positive_definite(g: Tensor, rel_floor: float = 1e-10) -> bool:
    """λ_min(g) > rel_floor · max|λ| (docs/paper.md §4 pitfall 2: a relative floor before calling a sign)."""
    lam = torch.linalg.eigvalsh(0.5 * (g + g.T))
    return bool(lam[0] > rel_floor * lam.abs().max())


def whitener(g: Tensor) -> Tensor:
    """W = g^{-1/2} (symmetric), so Wᵀ g W = I; g must be positive definite."""
    lam, vec = torch.linalg.eigh(0.5 * (g + g.T))
    if lam[0] <= 0:
        raise ValueError(f"cannot whiten an indefinite or singular metric: λ_min = {float(lam[0]):.3e}; "
                         f"choose a point where g is positive definite or another reading")
    return vec @ torch.diag(lam.rsqrt()) @ vec.T


def isotropy_error(w: Tensor, g: Tensor) -> float:
    """‖Wᵀ g W − I‖₂ (spectral norm: the largest |eigenvalue| of the symmetric difference)."""
    d = w.T @ g @ w
    d = 0.5 * (d + d.T) - torch.eye(g.shape[0], dtype=g.dtype)
    return float(torch.linalg.eigvalsh(d).abs().max())
