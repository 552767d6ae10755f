"""Fitting heads to make H_eff isotropic along a curve (Thm 3.2 and depth; docs/paper.md §2, claim C3).

Problem. A smooth closed curve γ: [0, 1) → R^d in representation space (:func:`fourier_curve`), T
points z_j = γ(j/T), a loss L: R^k → R with a *fixed* target c ∈ R^k (the stop-gradient target of
SimSiam/BYOL, held constant along the curve), and a head h_θ: R^d → R^k. At each point the
effective Hessian is the exact Hessian of the composite,

    H_j(θ) = ∇²_z L(h_θ(z)) |_{z = z_j} = J_hᵀ ∇²_u L J_h + Σ_i ρ_i ∇²_z h_i      (d, d),

one per-point block (the loss is summed over points, never averaged, so no 1/N appears). Thm 3.2
says that deep enough smooth MLP heads make H_eff ε-isotropic along such a trajectory; the fit
minimises the smooth objective J(θ) = mean_j ‖H_j(θ) − I‖_F² / d over θ and reports how close it got.

Losses (``LOSSES``), both on one point u (k,):
- ``cosine``: L(u) = −uᵀc / (‖u‖‖c‖), exact ("ambient") Hessian. Its metric g_L = ∇²_u L is curved
  (C2) and indefinite (one negative eigenvalue where cos > 0); L is 0-homogeneous, so for a
  *bias-free linear* head f(z) = L(Wz) Euler's identity gives zᵀH(z)z = 0 at every z: H_eff is
  never positive definite and ‖H − I‖₂ ≥ 1 everywhere (:func:`linear_cosine_lower_bound`). That is
  what makes the problem non-trivial: a linear head cannot undo the loss's geometry, only M ≠ 0
  (a smooth nonlinear head) can. L is bounded (|L| ≤ 1), which limits any head: if H_j = I along
  the whole curve then d/dt ∇f(γ) = γ', so f(γ(t)) = ½‖γ(t) + a‖² + b for a constant a, whose range
  over the curve must fit in [−1, 1]; the curve's diameter is kept ≲ 2 (``radius`` 0.5) so that this
  necessary condition holds.
- ``mse``: L(u) = ½‖u − c‖², ∇²_u L = I (flat control): any linear head with orthonormal columns
  gives H_eff = I exactly, so ε = 0 is reachable by depth 0.

Measures of isotropy of one block H (:func:`isotropy`), each a max over the T points:
- ``eps_iso``   = ‖H − I‖₂ = max|λ_i − 1| (unit scale, C1's isotropy error over all of R^d);
- ``eps_kappa`` = κ(H) − 1, κ = λ_max/λ_min (scale-free); +inf where λ_min ≤ 0 (H not positive definite);
- ``rel_fro``   = min_c ‖H − cI‖_F / ‖H‖_F, attained at c = tr H / d (from the centred eigenvalues).

H_eff in the fit comes from :func:`mlp_geometry`: value, Jacobian and second derivative propagated
through the layers in closed form (σ, σ', σ'' and the loss's ρ, ∇²L written out), so that one plain
autograd backward gives ∂J/∂θ (measured 2-6 ms against 30-35 ms per objective + gradient for
differentiating ``torch.func.hessian`` in θ, d=3, T=12, widths 8-32, one thread: transform dispatch
dominates at these sizes). :func:`heff_blocks` (``vmap(hessian(L ∘ h))``) is the
independent route for any callable head; tests check both against headgeom's engine, dense float64
autograd and each other, gradients included. (‖u‖ is written sqrt(uᵀu) in :func:`point_loss`:
``Tensor.norm`` hits an in-place error under grad of hessian in torch 2.x.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import hessian, vmap

from headgeom.heads import HeadSpec, ProjectionHead
from headgeom.io import json_safe
from headgeom.rng import seeded

LOSSES = ("cosine", "mse")
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh, "silu": F.silu, "gelu": F.gelu, "softplus": F.softplus,
}
Params = dict[str, Tensor]  # {"W0": (w1, d), "b0": (w1,), ..., "W{D}": (k, w_D), "b{D}": (k,)}


# ---------------------------------------------------------------------------- the curve
@dataclass(frozen=True)
class FourierCurve:
    """γ(t) = center + Σ_{m=1..M} a_m cos(2πmt) + b_m sin(2πmt): closed, smooth, period 1.

    center (d,), cos_coef and sin_coef (M, d).
    """

    center: Tensor
    cos_coef: Tensor
    sin_coef: Tensor

    def __call__(self, t: Tensor) -> Tensor:
        """(T,) -> (T, d)."""
        m = torch.arange(1, self.cos_coef.shape[0] + 1, dtype=self.center.dtype)
        phase = 2 * math.pi * t.to(self.center.dtype)[:, None] * m[None, :]  # (T, M)
        return self.center + torch.cos(phase) @ self.cos_coef + torch.sin(phase) @ self.sin_coef

    def points(self, n_points: int) -> Tensor:
        """z_j = γ(j / T), j = 0..T−1: (T, d)."""
        if n_points < 1:
            raise ValueError(f"the curve needs at least one point; got n_points={n_points}")
        return self(torch.arange(n_points, dtype=self.center.dtype) / n_points)


def fourier_curve(d: int, n_modes: int = 3, radius: float = 0.5, seed: int = 0,
                  dtype: torch.dtype = torch.float64) -> FourierCurve:
    """A random closed curve in R^d, deterministic from ``seed``.

    a_m, b_m ~ N(0, (radius/m)² I_d / d) (amplitude decaying as 1/m: smooth, RMS radius ≈ 1.28·radius),
    center ~ N(0, I_d / d).
    """
    if d < 1 or n_modes < 1 or not radius > 0:
        raise ValueError(f"fourier_curve needs d >= 1, n_modes >= 1, radius > 0; got d={d}, n_modes={n_modes}, "
                         f"radius={radius}")
    gen = torch.Generator().manual_seed(int(seed))
    scale = radius / torch.arange(1, n_modes + 1, dtype=dtype)[:, None] / math.sqrt(d)
    center = torch.randn(d, generator=gen, dtype=dtype) / math.sqrt(d)
    cos_coef = torch.randn(n_modes, d, generator=gen, dtype=dtype) * scale
    sin_coef = torch.randn(n_modes, d, generator=gen, dtype=dtype) * scale
    return FourierCurve(center, cos_coef, sin_coef)


# ---------------------------------------------------------------------------- the loss
def point_loss(name: str, target: Tensor) -> Callable[[Tensor], Tensor]:
    """L on one head output u (k,) with the fixed target c (k,); see the module docstring."""
    if name not in LOSSES:
        raise ValueError(f"unknown C3 loss {name!r}; choose one of {LOSSES}")
    c = target.detach()
    if name == "cosine":
        c_norm = float(c.norm())
        if c_norm == 0:
            raise ValueError("the cosine loss needs a non-zero target c")
        return lambda u: -(u @ c) / (torch.sqrt((u * u).sum()) * c_norm)
    return lambda u: 0.5 * ((u - c) ** 2).sum()


def batch_loss(name: str, target: Tensor) -> Callable[[Tensor], Tensor]:
    """Σ_j L(u_j) on a batch (N, k): its per-sample H_eff blocks are the per-point blocks (no 1/N)."""
    one = point_loss(name, target)
    return lambda u: vmap(one)(u).sum()


def fixed_target(k: int, seed: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """The loss target c ~ N(0, I_k), deterministic from ``seed`` (k,)."""
    return torch.randn(k, generator=torch.Generator().manual_seed(10_000 + int(seed)), dtype=dtype)


# ---------------------------------------------------------------------------- the head
def head_spec(d: int, k: int, depth: int, width: int, activation: str = "silu", bias: bool = True) -> HeadSpec:
    """depth = number of hidden layers: 0 is the linear head Linear(d→k); D ≥ 1 is
    Linear(d→width) → act → … (D activations) … → Linear(width→k)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"C3 heads need a smooth activation from {sorted(ACTIVATIONS)}; got {activation!r}")
    if depth < 0 or (depth > 0 and width < 1):
        raise ValueError(f"depth must be >= 0 and width >= 1 for depth > 0; got depth={depth}, width={width}")
    widths = (d,) + (width,) * depth + (k,)
    return HeadSpec(widths, activation=activation if depth > 0 else "linear", bias=bias)


def _linears(head: nn.Module) -> list[nn.Linear]:
    return [m for m in head.modules() if isinstance(m, nn.Linear)]


def init_params(spec: HeadSpec, seed: int, dtype: torch.dtype = torch.float64) -> Params:
    """PyTorch's default init of ``ProjectionHead(spec)`` as ``torch.manual_seed(seed)`` gives it, as a
    dict; the caller's random stream is left as it was (:func:`headgeom.rng.seeded`)."""
    with seeded(int(seed)):
        return params_of(ProjectionHead(spec, dtype=dtype))


def params_of(head: nn.Module) -> Params:
    """The Linear weights and biases of an MLP head as a detached dict (W0, b0, W1, ...)."""
    out: Params = {}
    for i, lin in enumerate(_linears(head)):
        out[f"W{i}"] = lin.weight.detach().clone()
        if lin.bias is not None:
            out[f"b{i}"] = lin.bias.detach().clone()
    return out


def head_from_params(spec: HeadSpec, params: Params) -> ProjectionHead:
    """A float64 eval-mode ProjectionHead(spec) holding ``params`` (for headgeom's engine)."""
    with seeded(0):  # its initial values are overwritten: drawn locally, the caller's stream untouched
        head = ProjectionHead(spec, dtype=torch.float64).eval()
    with torch.no_grad():
        for i, lin in enumerate(_linears(head)):
            lin.weight.copy_(params[f"W{i}"])
            if lin.bias is not None:
                lin.bias.copy_(params[f"b{i}"])
    return head


def mlp_forward(params: Params, z: Tensor, activation: str) -> Tensor:
    """u = h_θ(z) for z (d,) or (N, d): affine layers with ``activation`` between them."""
    act = ACTIVATIONS[activation]
    n_layers = _n_layers(params)
    x = z
    for i in range(n_layers):
        x = x @ params[f"W{i}"].T
        if f"b{i}" in params:
            x = x + params[f"b{i}"]
        if i < n_layers - 1:
            x = act(x)
    return x


def _n_layers(params: Params) -> int:
    n = sum(1 for key in params if key.startswith("W"))
    if n < 1 or any(f"W{i}" not in params for i in range(n)):
        raise ValueError(f"params must hold W0..W(n-1) (and optional b0..); got keys {sorted(params)}")
    return n


def activation_derivatives(activation: str, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(σ(a), σ'(a), σ''(a)) in closed form, elementwise."""
    if activation == "tanh":
        t = torch.tanh(a)
        return t, 1 - t * t, -2 * t * (1 - t * t)
    if activation == "silu":
        s = torch.sigmoid(a)
        return a * s, s * (1 + a * (1 - s)), s * (1 - s) * (2 + a * (1 - 2 * s))
    if activation == "softplus":
        s = torch.sigmoid(a)
        return F.softplus(a), s, s * (1 - s)
    if activation == "gelu":  # exact (erf) GELU: σ = aΦ(a)
        phi = torch.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + torch.erf(a / math.sqrt(2)))
        return a * cdf, cdf + a * phi, phi * (2 - a * a)
    raise ValueError(f"unknown C3 activation {activation!r}; choose one of {sorted(ACTIVATIONS)}")


def loss_derivatives(name: str, target: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """ρ = ∇_u L (N, k) and A = ∇²_u L (N, k, k) in closed form at the rows of u (N, k).

    cosine, with n = ‖u‖, û = u/n, ĉ = c/‖c‖:  ρ = −(ĉ − (ûᵀĉ)û)/n,
    A = [ĉûᵀ + ûĉᵀ + (ûᵀĉ)(I − 3ûûᵀ)] / n².   mse: ρ = u − c, A = I.
    """
    if name not in LOSSES:
        raise ValueError(f"unknown C3 loss {name!r}; choose one of {LOSSES}")
    k = u.shape[-1]
    eye = torch.eye(k, dtype=u.dtype, device=u.device)
    if name == "mse":
        return u - target, eye.expand(u.shape[0], k, k)
    c_hat = target / target.norm()
    n = torch.sqrt((u * u).sum(-1, keepdim=True))  # (N, 1)
    u_hat = u / n
    cos = (u_hat * c_hat).sum(-1, keepdim=True)  # (N, 1)
    rho = -(c_hat - cos * u_hat) / n
    outer = c_hat[None, :, None] * u_hat[:, None, :]
    hess = (outer + outer.transpose(1, 2) + cos[:, :, None] * (eye - 3 * u_hat[:, :, None] * u_hat[:, None, :]))
    return rho, hess / (n * n)[:, :, None]


@dataclass(frozen=True)
class MLPGeometry:
    """Per-point H_eff = G + M of L ∘ h_θ at z (T, d): h, g, m (T, d, d); u, rho (T, k)."""

    h: Tensor
    g: Tensor
    m: Tensor
    u: Tensor
    rho: Tensor


def mlp_geometry(params: Params, activation: str, loss_name: str, target: Tensor, z: Tensor) -> MLPGeometry:
    """H_eff, G, M of an MLP head in closed form, differentiable in params by plain autograd.

    Forward propagation of value x, Jacobian J = ∂x/∂z and second derivative S = ∂²x/∂z² through
    each layer: affine a = Wx + b gives (Wx + b, WJ, WS); the activation gives
    (σ(a), σ'(a)·J_a, σ''(a)·J_a⊗J_a + σ'(a)·S_a). Then G = Jᵀ A J and M = Σ_i ρ_i S_i.
    Shapes: x (T, w), J (T, w, d), S (T, w, d, d).
    """
    n_layers = _n_layers(params)
    t, d = z.shape
    x = z
    jac = torch.eye(d, dtype=z.dtype, device=z.device).expand(t, d, d)
    sec = None  # S = 0 until the first activation
    for i in range(n_layers):
        w = params[f"W{i}"]
        x = x @ w.T
        if f"b{i}" in params:
            x = x + params[f"b{i}"]
        jac = torch.einsum("oi,tid->tod", w, jac)
        if sec is not None:
            sec = torch.einsum("oi,tide->tode", w, sec)
        if i < n_layers - 1:
            x, d1, d2 = activation_derivatives(activation, x)
            curv = d2[:, :, None, None] * jac[:, :, :, None] * jac[:, :, None, :]
            sec = curv if sec is None else curv + d1[:, :, None, None] * sec
            jac = d1[:, :, None] * jac
    rho, a = loss_derivatives(loss_name, target, x)
    g = torch.einsum("tid,tij,tje->tde", jac, a, jac)
    m = torch.zeros_like(g) if sec is None else torch.einsum("ti,tide->tde", rho, sec)
    return MLPGeometry(h=g + m, g=g, m=m, u=x, rho=rho)


# ---------------------------------------------------------------------------- H_eff and isotropy
def heff_blocks(fn: Callable[[Tensor], Tensor], loss: Callable[[Tensor], Tensor], z: Tensor) -> Tensor:
    """H_j = ∇²_z L(fn(z)) at each row z_j of z (T, d) -> (T, d, d); fn maps (d,) to (k,).

    Differentiable in whatever fn closes over when called inside ``torch.func.grad``.
    """
    return vmap(hessian(lambda zi: loss(fn(zi))))(z)


def isotropy_objective(blocks: Tensor) -> Tensor:
    """J = mean_j ‖H_j − I‖_F² / d for blocks (T, d, d) -> scalar (the fit's smooth objective)."""
    d = blocks.shape[-1]
    eye = torch.eye(d, dtype=blocks.dtype, device=blocks.device)
    return ((blocks - eye) ** 2).sum(dim=(-2, -1)).mean() / d


@dataclass(frozen=True)
class Isotropy:
    """Isotropy of the blocks H_j (max over points j; definitions in the module docstring)."""

    eps_iso: float  # max_j ‖H_j − I‖₂
    eps_kappa: float  # max_j κ(H_j) − 1; inf when some H_j has λ_min ≤ 0
    rel_fro: float  # max_j min_c ‖H_j − cI‖_F / ‖H_j‖_F
    n_indefinite: int  # points with λ_min ≤ 0
    lambda_min: float  # min_j λ_min(H_j)
    lambda_max: float  # max_j λ_max(H_j)
    scale_min: float  # min_j tr(H_j)/d (the best c)
    scale_max: float

    def as_dict(self) -> dict[str, float | int | str | None]:
        """JSON-able (headgeom.io.json_safe): an infinite eps_kappa (see n_indefinite) is "inf"."""
        return json_safe(dict(self.__dict__))


def isotropy(blocks: Tensor) -> Isotropy:
    """Exact (float64 eigvalsh) isotropy measures of symmetric blocks (T, d, d)."""
    h = blocks.detach().to(torch.float64)
    h = 0.5 * (h + h.transpose(-1, -2))
    lam = torch.linalg.eigvalsh(h)  # (T, d) ascending
    d = h.shape[-1]
    lo, hi = lam[:, 0], lam[:, -1]
    pos = lo > 0
    kappa = torch.where(pos, hi / torch.where(pos, lo, torch.ones_like(lo)), torch.full_like(lo, math.inf))
    tr = lam.sum(-1)
    # ‖H − (tr H/d) I‖_F from the centred eigenvalues (1 − tr²/(d‖H‖²) would cancel to √eps)
    rel = (lam - tr[:, None] / d).norm(dim=-1) / lam.norm(dim=-1).clamp_min(1e-300)
    return Isotropy(
        eps_iso=float((lam - 1).abs().max()), eps_kappa=float(kappa.max() - 1), rel_fro=float(rel.max()),
        n_indefinite=int((~pos).sum()), lambda_min=float(lo.min()), lambda_max=float(hi.max()),
        scale_min=float((tr / d).min()), scale_max=float((tr / d).max()),
    )


def linear_cosine_lower_bound(weight: Tensor, z: Tensor) -> Tensor:
    """For a bias-free linear head u = Wz under the cosine loss, ẑᵀH(z)ẑ = 0 (Euler: L∘W is
    0-homogeneous), so ‖H(z) − I‖₂ ≥ |ẑᵀ(H − I)ẑ| = 1 at every z. Returns ẑᵀH(z)ẑ at rows of z (T,)
    by a separate second-derivative route (d²/ds² L(W z (1+s)) at s = 0 / ‖z‖²), all zero up to round-off."""
    c = torch.ones(weight.shape[0], dtype=weight.dtype)  # any target: the identity holds for all c
    loss = point_loss("cosine", c)

    def radial(zi: Tensor) -> Tensor:
        along = lambda s: loss(weight @ (zi * (1 + s)))  # noqa: E731
        return torch.func.grad(torch.func.grad(along))(torch.zeros((), dtype=zi.dtype))

    return vmap(radial)(z) / (z * z).sum(-1)


# ---------------------------------------------------------------------------- the fit
@dataclass
class FitResult:
    """Outcome of :func:`fit_isotropy`. ``history`` holds J after each Adam step and each L-BFGS
    evaluation (line-search trial points included)."""

    params: Params
    objective_initial: float
    objective_final: float
    adam_steps: int
    lbfgs_iterations: int
    func_evals: int
    grad_norm: float
    converged: bool
    stop_reason: str
    history: list[float] = field(default_factory=list)


def _grads(value: Tensor, leaves: Params) -> list[Tensor]:
    """∂value/∂leaf for every leaf; zeros where value does not depend on it (e.g. the last bias under mse)."""
    grads = torch.autograd.grad(value, list(leaves.values()), allow_unused=True)
    return [torch.zeros_like(t) if g is None else g.detach() for t, g in zip(leaves.values(), grads)]


def fit_isotropy(params: Params, activation: str, loss_name: str, target: Tensor, z: Tensor, *,
                 adam_steps: int = 200, adam_lr: float = 1e-2, lbfgs_iters: int = 200,
                 tolerance_grad: float = 1e-10, tolerance_change: float = 1e-14,
                 plateau_tol: float = 1e-3) -> FitResult:
    """Minimise J(θ) = mean_j ‖H_j(θ) − I‖_F² / d (H_j from :func:`mlp_geometry`): Adam
    (``adam_steps``), then L-BFGS with strong-Wolfe line search (``lbfgs_iters``). Returns the best
    parameters seen.

    converged: L-BFGS stopped on its own tolerances before its caps, or J plateaued (the best J
    improved by less than ``plateau_tol`` relatively over the last 10% of evaluations, and at least
    over 2). A non-finite J or gradient stops the fit (stop_reason "non-finite") and keeps the best
    finite parameters.
    """
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    history: list[float] = []
    best: dict = {"J": math.inf, "params": {k: v.detach().clone() for k, v in leaves.items()}}
    nonfinite = [False]

    def evaluate() -> Tensor:
        for t in leaves.values():
            t.grad = None
        value = isotropy_objective(mlp_geometry(leaves, activation, loss_name, target, z).h)
        for t, g in zip(leaves.values(), _grads(value, leaves)):
            t.grad = g
        j = float(value.detach())
        history.append(j)
        if not math.isfinite(j) or not all(torch.isfinite(t.grad).all() for t in leaves.values()):
            nonfinite[0] = True
            for t in leaves.values():
                t.grad = torch.zeros_like(t)
            return torch.tensor(math.inf, dtype=value.dtype)
        if j < best["J"]:
            best["J"], best["params"] = j, {k: t.detach().clone() for k, t in leaves.items()}
        return value.detach()

    with torch.no_grad():
        j0 = float(isotropy_objective(mlp_geometry(leaves, activation, loss_name, target, z).h))
    stop, steps = "budget", 0
    opt = torch.optim.Adam(leaves.values(), lr=adam_lr)
    for steps in range(1, adam_steps + 1):
        evaluate()
        if nonfinite[0]:
            stop = "non-finite"
            break
        opt.step()
    n_iter = evals = 0
    max_eval = int(lbfgs_iters * 1.5)
    if not nonfinite[0] and lbfgs_iters > 0:
        with torch.no_grad():
            for k, t in leaves.items():
                t.copy_(best["params"][k])
        lbfgs = torch.optim.LBFGS(leaves.values(), lr=1.0, max_iter=lbfgs_iters, max_eval=max_eval,
                                  tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                                  history_size=20, line_search_fn="strong_wolfe")
        lbfgs.step(evaluate)
        st = lbfgs.state[next(iter(leaves.values()))]
        n_iter, evals = int(st.get("n_iter", 0)), int(st.get("func_evals", 0))
        if nonfinite[0]:
            stop = "non-finite"
        elif n_iter < lbfgs_iters and evals < max_eval:
            stop = "tolerance"
    final = {k: v.requires_grad_(True) for k, v in best["params"].items()}
    value = isotropy_objective(mlp_geometry(final, activation, loss_name, target, z).h)
    grad_norm = float(torch.sqrt(sum((g ** 2).sum() for g in _grads(value, final))))
    final = {k: v.detach() for k, v in final.items()}
    finite = [h for h in history if math.isfinite(h)]
    tail = max(2, len(finite) // 10)
    plateau = False
    if len(finite) >= 2 * tail:
        before, after = min(finite[:-tail]), min(finite)
        plateau = (before - after) <= plateau_tol * max(abs(before), 1e-300)
    if stop == "budget" and plateau:
        stop = "plateau"
    return FitResult(params=final, objective_initial=j0, objective_final=float(value.detach()), adam_steps=steps,
                     lbfgs_iterations=n_iter, func_evals=evals, grad_norm=grad_norm,
                     converged=stop in ("tolerance", "plateau"), stop_reason=stop, history=history)
