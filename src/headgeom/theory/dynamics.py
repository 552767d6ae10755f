"""A small SimSiam-style system near collapse, its gradient flow and gradient descent (claim C5).

The ReLU gap (docs/paper.md §2, C5): ReLU heads have M = 0 almost everywhere, so under exact
gradient flow they lack the negative curvature that smooth heads inject at collapse; finite
step sizes and BatchNorm are the claimed escape routes. This module holds the pure pieces:

System (everything float64, one parameter vector θ):
    backbone  "free":   the representations themselves, r (N, d), are parameters;
              "linear": z = W_b x + b on fixed random inputs x (N, d_in), W_b and b trained.
    views     two fixed near-identity linear augmentations A_v = I + s·R_v/√D (R_v Gaussian,
              s = ``aug_strength``) act on the backbone input (free: on r itself):
              z_v = A_v r (free) or z_v = W_b A_v x + b (linear).
    projector the paper's template Linear(d→width, no bias) → [BN] → act → Linear(width→k, no bias)
    predictor the same template k → pred_width → k (docs/paper.md §3: same activation/BN), or none.
    loss      SimSiam −½[cos(p1, sg(u2)) + cos(p2, sg(u1))] (facebookresearch/simsiam), via
              headgeom.objectives.negative_cosine; ``stop_gradient=False`` differentiates the
              targets too (then the field is a true gradient and the loss is a Lyapunov function).
    BN        train mode (batch statistics, biased variance, eps), affine γ, β trained.

Initial conditions near collapse ("near_point"): free r_i = c + ε g_i; linear W_b = ε·W, b = c
(c ~ N(0, I_d), ε = ``init_spread``); or the paper's pseudo-collapse ("projector_x0.1"): a
normal backbone and the projector's linear weights ×0.1. Linear weights start N(0, 1/fan_in).

Dynamics: gradient flow dθ/dt = −g(θ) by the solvers of scipy.integrate.solve_ivp (stepped, so that
an evaluation budget can stop a run honestly), and gradient descent
θ ← θ − η g(θ) for round(T/η) steps; g is the (stop-gradient) gradient of the loss.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, Radau
from scipy.special import erf
from torch import Tensor

from headgeom.geometry import effective_hessian
from headgeom.heads.activations import canonical_act, get_act
from headgeom.objectives import negative_cosine

BACKBONES = ("free", "linear")
INITS = ("near_point", "projector_x0.1")
DTYPE = torch.float64
IMPLICIT = ("Radau", "BDF", "LSODA")


@dataclass(frozen=True)
class SystemSpec:
    """Sizes and options of the small SimSiam system (see the module docstring)."""

    activation: str = "relu"
    bn: bool = False
    backbone: str = "free"
    n: int = 16
    d_in: int = 8
    d: int = 4
    width: int = 16
    k: int = 8
    pred_width: int = 8  # 0: no predictor (p = u)
    aug_strength: float = 0.3
    init: str = "near_point"
    init_spread: float = 1e-2
    stop_gradient: bool = True
    bn_eps: float = 1e-5

    def __post_init__(self) -> None:
        object.__setattr__(self, "activation", canonical_act(self.activation))
        if self.backbone not in BACKBONES:
            raise ValueError(f"backbone must be one of {BACKBONES}; got {self.backbone!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}; got {self.init!r}")
        for name in ("n", "d_in", "d", "width", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"SystemSpec.{name} must be a positive int; got {v!r}")
        if self.n < 2:
            raise ValueError(f"SystemSpec.n must be >= 2 (spread and BatchNorm need a batch); got {self.n}")
        if not isinstance(self.pred_width, int) or self.pred_width < 0:
            raise ValueError(f"SystemSpec.pred_width must be an int >= 0 (0: no predictor); got {self.pred_width!r}")
        for name in ("aug_strength", "init_spread", "bn_eps"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"SystemSpec.{name} must be a finite number >= 0; got {v!r}")


@dataclass
class System:
    """A built system: fixed data (inputs, augmentations) and the parameter layout."""

    spec: SystemSpec
    x: Tensor | None  # (N, d_in) inputs of the linear backbone; None for free representations
    aug: Tensor  # (2, D, D) the two view maps A_1, A_2 (D = d_in or d)
    layout: list[tuple[str, tuple[int, ...]]]
    theta0: np.ndarray  # (P,) initial parameters

    @property
    def num_params(self) -> int:
        return int(self.theta0.size)


def _layout(spec: SystemSpec) -> list[tuple[str, tuple[int, ...]]]:
    out: list[tuple[str, tuple[int, ...]]] = []
    if spec.backbone == "free":
        out.append(("r", (spec.n, spec.d)))
    else:
        out += [("Wb", (spec.d, spec.d_in)), ("bb", (spec.d,))]
    mlps = [("P", spec.d, spec.width)] + ([("Q", spec.k, spec.pred_width)] if spec.pred_width else [])
    for name, w_in, w_hidden in mlps:
        out.append((f"{name}1", (w_hidden, w_in)))
        if spec.bn:
            out += [(f"{name}g", (w_hidden,)), (f"{name}b", (w_hidden,))]
        out.append((f"{name}2", (spec.k, w_hidden)))
    return out


def build_system(spec: SystemSpec, seed: int) -> System:
    """Draw inputs, augmentations and the near-collapse initial θ from ``seed``."""
    gen = torch.Generator().manual_seed(int(seed))
    randn = lambda *shape: torch.randn(*shape, generator=gen, dtype=DTYPE)  # noqa: E731
    dim = spec.d_in if spec.backbone == "linear" else spec.d
    eye = torch.eye(dim, dtype=DTYPE)
    aug = torch.stack([eye + spec.aug_strength * randn(dim, dim) / math.sqrt(dim) for _ in range(2)])
    x = randn(spec.n, spec.d_in) if spec.backbone == "linear" else None
    near = spec.init == "near_point"
    eps = spec.init_spread
    values: dict[str, Tensor] = {}
    for name, shape in _layout(spec):
        if name == "r":
            values[name] = randn(spec.d)[None, :] + eps * randn(*shape) if near else randn(*shape)
        elif name == "Wb":
            values[name] = (eps if near else 1.0) * randn(*shape) / math.sqrt(spec.d_in)
        elif name == "bb":
            values[name] = randn(*shape) if near else torch.zeros(shape, dtype=DTYPE)
        elif name.endswith("g"):
            values[name] = torch.ones(shape, dtype=DTYPE)
        elif name.endswith("b"):
            values[name] = torch.zeros(shape, dtype=DTYPE)
        else:
            w = randn(*shape) / math.sqrt(shape[1])
            values[name] = w * 0.1 if (not near and name[0] == "P") else w
    theta0 = torch.cat([values[name].reshape(-1) for name, _ in _layout(spec)]).numpy()
    return System(spec, x, aug, _layout(spec), theta0)


def unpack(system: System, theta: Tensor) -> dict[str, Tensor]:
    """θ (P,) -> named parameter views (differentiable)."""
    if theta.shape != (system.num_params,):
        raise ValueError(f"theta must have shape ({system.num_params},); got {tuple(theta.shape)}")
    out, i = {}, 0
    for name, shape in system.layout:
        size = math.prod(shape)
        out[name] = theta[i:i + size].reshape(shape)
        i += size
    return out


def _mlp(params: dict[str, Tensor], name: str, x: Tensor, spec: SystemSpec) -> Tensor:
    """Linear(no bias) → [BN, train mode] → act → Linear(no bias); x (N, a) -> (N, k)."""
    h = x @ params[f"{name}1"].T
    if spec.bn:
        mean = h.mean(0, keepdim=True)
        var = ((h - mean) ** 2).mean(0, keepdim=True)  # biased, as BatchNorm1d normalises
        h = (h - mean) / torch.sqrt(var + spec.bn_eps) * params[f"{name}g"] + params[f"{name}b"]
    h = get_act(spec.activation)(h)
    return h @ params[f"{name}2"].T


def views(system: System, params: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """The backbone outputs of the two views, z1, z2 (N, d)."""
    if system.spec.backbone == "free":
        return params["r"] @ system.aug[0].T, params["r"] @ system.aug[1].T
    out = [system.x @ a.T @ params["Wb"].T + params["bb"] for a in system.aug]
    return out[0], out[1]


def projector(system: System, params: dict[str, Tensor], z: Tensor) -> Tensor:
    return _mlp(params, "P", z, system.spec)


def predictor(system: System, params: dict[str, Tensor], u: Tensor) -> Tensor:
    return _mlp(params, "Q", u, system.spec) if system.spec.pred_width else u


def head_fn(system: System, theta: Tensor) -> Callable[[Tensor], Tensor]:
    """The online head z ↦ p = predictor(projector(z)) at parameters θ (parameters constant)."""
    params = unpack(system, theta.detach())
    return lambda z: predictor(system, params, projector(system, params, z))


def forward(system: System, theta: Tensor) -> dict[str, Tensor]:
    """z1, z2 (N, d), u1, u2 (N, k) projector outputs, p1, p2 (N, k) predictions."""
    params = unpack(system, theta)
    z1, z2 = views(system, params)
    u1, u2 = projector(system, params, z1), projector(system, params, z2)
    return {"z1": z1, "z2": z2, "u1": u1, "u2": u2,
            "p1": predictor(system, params, u1), "p2": predictor(system, params, u2)}


def objective(system: System, theta_online: Tensor, theta_target: Tensor) -> Tensor:
    """½[−cos(p1(θ_on), u2(θ_tgt)) − cos(p2(θ_on), u1(θ_tgt))]; targets detached when stop_gradient."""
    on, tgt = forward(system, theta_online), forward(system, theta_target)
    u1, u2 = (tgt["u1"].detach(), tgt["u2"].detach()) if system.spec.stop_gradient else (tgt["u1"], tgt["u2"])
    if system.spec.stop_gradient:  # negative_cosine detaches its target itself
        return 0.5 * (negative_cosine(on["p1"], u2) + negative_cosine(on["p2"], u1))
    cos = torch.nn.functional.cosine_similarity
    return -0.5 * (cos(on["p1"], u2, dim=1).mean() + cos(on["p2"], u1, dim=1).mean())


def loss(system: System, theta: Tensor | np.ndarray) -> float:
    """The SimSiam loss value at θ (between −1 and 1)."""
    theta = torch.as_tensor(theta, dtype=DTYPE)
    with torch.no_grad():
        return float(objective(system, theta, theta))


def gradient(system: System, theta: Tensor) -> Tensor:
    """g(θ) (P,): the stop-gradient gradient of the loss (the true gradient if not stop_gradient)."""
    on = theta.detach().clone().requires_grad_(True)
    value = objective(system, on, on if not system.spec.stop_gradient else theta.detach())
    (g,) = torch.autograd.grad(value, on)
    return g


def field_jacobian(system: System) -> Callable[[np.ndarray], np.ndarray]:
    """θ ↦ ∂g/∂θ (P, P) by torch.func (forward over reverse), for implicit solvers on stiff runs.

    g(θ) = ∂₁O(θ, θ) with O(θ_on, θ_tgt) the objective; its Jacobian is ∂₁₁O + ∂₁₂O, so the
    target argument must stay differentiable here (stop-gradient means ∂₁ only, not a constant θ).
    """
    cos = torch.nn.functional.cosine_similarity

    def obj(on: Tensor, tgt: Tensor) -> Tensor:
        a, b = forward(system, on), forward(system, tgt)
        return -0.5 * (cos(a["p1"], b["u2"], dim=1).mean() + cos(a["p2"], b["u1"], dim=1).mean())

    if system.spec.stop_gradient:
        field = lambda th: torch.func.grad(obj, argnums=0)(th, th)  # noqa: E731
    else:
        field = torch.func.grad(lambda th: obj(th, th))
    jac = torch.func.jacfwd(field)
    return lambda y: jac(torch.from_numpy(np.ascontiguousarray(y, dtype=np.float64))).numpy()


def torch_gradient(system: System) -> Callable[[np.ndarray], np.ndarray]:
    """θ ↦ g(θ) on float64 numpy vectors through torch autograd (the reference, any activation)."""
    return lambda y: gradient(system, torch.from_numpy(np.ascontiguousarray(y, dtype=np.float64))).numpy()


def numpy_gradient(system: System) -> Callable[[np.ndarray], np.ndarray]:
    """θ ↦ g(θ) for the integrators: hand-written numpy backprop where available (the stop-gradient
    loss with linear/relu/silu/gelu activations, ~10x less overhead than autograd on these tiny
    tensors, tested against :func:`gradient`), else torch autograd."""
    if system.spec.stop_gradient and system.spec.activation in _NP_ACTS:
        return lambda y: _np_gradient(system, np.asarray(y, dtype=np.float64))
    return torch_gradient(system)


# σ(a), σ'(a) for the numpy path; gelu is the exact erf form of nn.GELU()
_NP_ACTS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "linear": lambda a: (a, np.ones_like(a)),
    "relu": lambda a: (np.maximum(a, 0.0), (a > 0).astype(np.float64)),
    "silu": lambda a: (lambda s: (a * s, s * (1.0 + a * (1.0 - s))))(0.5 * (1.0 + np.tanh(0.5 * a))),
    "gelu": lambda a: (lambda c: (a * c, c + a * np.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)))(
        0.5 * (1.0 + erf(a / math.sqrt(2.0)))),
}


def _np_mlp(p: dict[str, np.ndarray], name: str, a0: np.ndarray, spec: SystemSpec):
    h = a0 @ p[f"{name}1"].T
    cache = {"a0": a0}
    if spec.bn:
        c = h - h.mean(0)
        s = np.sqrt((c * c).mean(0) + spec.bn_eps)
        cache["hhat"], cache["s"] = c / s, s
        h = cache["hhat"] * p[f"{name}g"] + p[f"{name}b"]
    o, cache["dsig"] = _NP_ACTS[spec.activation](h)
    cache["o"] = o
    return o @ p[f"{name}2"].T, cache


def _np_mlp_back(p: dict[str, np.ndarray], name: str, cache: dict, dy: np.ndarray, spec: SystemSpec,
                 grads: dict[str, np.ndarray]) -> np.ndarray:
    grads[f"{name}2"] += dy.T @ cache["o"]
    da = (dy @ p[f"{name}2"]) * cache["dsig"]
    if spec.bn:
        hhat = cache["hhat"]
        grads[f"{name}g"] += (da * hhat).sum(0)
        grads[f"{name}b"] += da.sum(0)
        dhh = da * p[f"{name}g"]
        da = (dhh - dhh.mean(0) - hhat * (dhh * hhat).mean(0)) / cache["s"]
    grads[f"{name}1"] += da.T @ cache["a0"]
    return da @ p[f"{name}1"]


def _np_gradient(system: System, theta: np.ndarray) -> np.ndarray:
    spec = system.spec
    p, i = {}, 0
    for name, shape in system.layout:
        size = math.prod(shape)
        p[name] = theta[i:i + size].reshape(shape)
        i += size
    grads = {name: np.zeros(shape) for name, shape in system.layout}
    aug = system.aug.numpy()
    if spec.backbone == "free":
        inputs = [None, None]
        zs = [p["r"] @ a.T for a in aug]
    else:
        inputs = [system.x.numpy() @ a.T for a in aug]
        zs = [xv @ p["Wb"].T + p["bb"] for xv in inputs]
    proj = [_np_mlp(p, "P", z, spec) for z in zs]
    us = [u for u, _ in proj]
    pred = [_np_mlp(p, "Q", u, spec) for u in us] if spec.pred_width else [(u, None) for u in us]
    n = spec.n
    if min(float(np.linalg.norm(q[0], axis=1).min()) for q in pred + [(u, None) for u in us]) == 0.0:
        # a dead ReLU branch outputs exact zeros; torch's cosine (with its eps) defines that case
        return torch_gradient(system)(theta)
    for v in range(2):
        pv, tgt = pred[v][0], us[1 - v]  # −½ mean_i cos(p_v, sg(u_other))
        pn = np.linalg.norm(pv, axis=1, keepdims=True)
        tn = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
        cos = (pv * tn).sum(1, keepdims=True) / pn
        dp = -(0.5 / n) * (tn / pn - cos * pv / pn**2)
        du = _np_mlp_back(p, "Q", pred[v][1], dp, spec, grads) if spec.pred_width else dp
        dz = _np_mlp_back(p, "P", proj[v][1], du, spec, grads)
        if spec.backbone == "free":
            grads["r"] += dz @ aug[v]
        else:
            grads["Wb"] += dz.T @ inputs[v]
            grads["bb"] += dz.sum(0)
    return np.concatenate([grads[name].reshape(-1) for name, _ in system.layout])


# ----------------------------------------------------------------------------- integrators
@dataclass
class Trajectory:
    """Recorded states: t (T,) and theta (T, P); rows after a divergence are NaN."""

    t: np.ndarray
    theta: np.ndarray
    method: str  # "flow:<solver>" or "gd"
    nfev: int  # gradient evaluations
    success: bool
    message: str
    diverged: bool = False


def integrate_flow(grad_fn: Callable[[np.ndarray], np.ndarray], theta0: np.ndarray, t_eval: np.ndarray, *,
                   method: str = "DOP853", rtol: float = 1e-10, atol: float = 1e-12,
                   jacobian: Callable[[np.ndarray], np.ndarray] | None = None,
                   max_nfev: int | None = None) -> Trajectory:
    """Gradient flow dθ/dt = −g(θ) from θ(0) = theta0, recorded at t_eval (increasing, from 0).

    The adaptive solvers of scipy.integrate.solve_ivp (``method``: RK45, RK23, DOP853, Radau,
    BDF, LSODA), stepped here so that a budget ``max_nfev`` of field evaluations can stop a run
    honestly (success False, later rows NaN) instead of running for hours; each recorded state
    comes from the solver's dense output within its accepted step. ``jacobian`` (θ ↦ ∂g/∂θ) is
    passed, negated, to the implicit methods.
    """
    solvers = {"RK45": RK45, "RK23": RK23, "DOP853": DOP853, "Radau": Radau, "BDF": BDF, "LSODA": LSODA}
    if method not in solvers:
        raise ValueError(f"method must be one of {sorted(solvers)}; got {method!r}")
    t_eval = np.asarray(t_eval, dtype=np.float64)
    if t_eval.ndim != 1 or t_eval.size < 2 or t_eval[0] != 0 or np.any(np.diff(t_eval) <= 0):
        raise ValueError(f"t_eval must be increasing, start at 0 and have >= 2 points; got {t_eval[:5]}...")
    if not (0 < rtol < 1 and atol > 0):
        raise ValueError(f"need 0 < rtol < 1 and atol > 0; got rtol={rtol}, atol={atol}")
    extra = {"jac": lambda t, y: -jacobian(y)} if jacobian is not None and method in IMPLICIT else {}
    y0 = np.array(theta0, dtype=np.float64)
    solver = solvers[method](lambda t, y: -grad_fn(y), 0.0, y0, float(t_eval[-1]), rtol=rtol, atol=atol, **extra)
    theta = np.full((t_eval.size, y0.size), np.nan)
    theta[0], j = y0, 1
    message, ok = "reached the end of the horizon", True
    while solver.status == "running":
        if max_nfev is not None and solver.nfev >= max_nfev:
            message, ok = f"stopped at t={solver.t:.4g} of {t_eval[-1]:g}: max_nfev={max_nfev} evaluations used", False
            break
        err = solver.step()
        if solver.status == "failed":
            message, ok = f"solver failed at t={solver.t:.4g}: {err}", False
            break
        if j < t_eval.size and t_eval[j] <= solver.t:
            dense = solver.dense_output()
            while j < t_eval.size and t_eval[j] <= solver.t:
                theta[j] = dense(t_eval[j])
                j += 1
    diverged = not np.all(np.isfinite(theta[:j]))
    return Trajectory(t_eval, theta, f"flow:{method}", int(solver.nfev), ok and j == t_eval.size, message, diverged)


def gradient_descent(grad_fn: Callable[[np.ndarray], np.ndarray], theta0: np.ndarray, lr: float, horizon: float,
                     t_record: np.ndarray) -> Trajectory:
    """θ ← θ − lr·g(θ) for round(horizon/lr) steps; records the steps nearest to t_record.

    Step k is time k·lr, so runs at different lr share the time axis of the flow; the recorded
    times are the unique k·lr with k = round(t/lr). A non-finite state stops the run (diverged).
    """
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive finite number; got {lr!r}")
    steps = int(round(horizon / lr))
    if steps < 1:
        raise ValueError(f"horizon {horizon} is shorter than one step of lr {lr}; raise the horizon")
    ks = np.unique(np.clip(np.rint(np.asarray(t_record, dtype=np.float64) / lr).astype(np.int64), 0, steps))
    theta = np.full((ks.size, len(theta0)), np.nan)
    y = np.array(theta0, dtype=np.float64)
    j, message, diverged, evals = 0, f"{steps} steps", False, 0
    for k in range(steps + 1):
        if j < ks.size and ks[j] == k:
            theta[j] = y
            j += 1
        if k == steps:
            break
        y = y - lr * grad_fn(y)
        evals += 1
        if not np.all(np.isfinite(y)):
            diverged, message = True, f"non-finite state at step {k + 1} of {steps} (lr {lr} too large)"
            break
    return Trajectory(ks * lr, theta, "gd", evals, not diverged, message, diverged)


# ----------------------------------------------------------------------------- observables
def spread(x: Tensor) -> float:
    """Mean over dimensions of the per-dimension std (over samples, ddof=1) of the L2-normalised rows of x (N, D)."""
    xn = torch.nn.functional.normalize(x, dim=1)  # eps 1e-12: a zero row (dead head) stays zero
    return float(xn.std(dim=0, unbiased=True).mean())


def escape_time(t: np.ndarray, s: np.ndarray, factor: float) -> float | None:
    """First recorded t with s(t) ≥ factor · s(0); None if never (NaN entries never count)."""
    s = np.asarray(s, dtype=np.float64)
    if not math.isfinite(s[0]) or s[0] <= 0:
        return None
    hit = np.nonzero(np.nan_to_num(s, nan=-np.inf) >= factor * s[0])[0]
    return float(t[hit[0]]) if hit.size else None


def observables(system: System, theta: np.ndarray) -> dict[str, float]:
    """loss, spread of z1 (backbone, view 1) and of u1 (projector, view 1) at θ; NaN if θ is not finite."""
    if not np.all(np.isfinite(theta)):
        return {"loss": math.nan, "spread_backbone": math.nan, "spread_projector": math.nan}
    th = torch.from_numpy(np.ascontiguousarray(theta))
    with torch.no_grad():
        out = forward(system, th)
        value = float(objective(system, th, th))
    return {"loss": value, "spread_backbone": spread(out["z1"]), "spread_projector": spread(out["u1"])}


def head_geometry(system: System, theta: np.ndarray, *, reading: str = "ambient") -> dict[str, object]:
    """H_eff = G + M of the online head z1 ↦ p1 under L(p1) = −½ cos(p1, sg(u2)) at θ.

    That is the part of the SimSiam loss that depends on z1 when the targets are stopped (the
    other term sees z1 only through sg(u1)). Dense float64 via headgeom.geometry.effective_hessian
    (N·d entries); train-mode BN couples the samples, which the engine handles. Returns
    max|M|, ‖M‖_F/‖H_eff‖_F, max|H_eff|, λ_min(H_eff), ``dead`` (H_eff and J_h exactly zero:
    every hidden unit off on every sample, pitfall 8), the fraction of hidden pre-activations
    > 0 and their smallest |value| (distance to a ReLU kink).
    """
    th = torch.from_numpy(np.ascontiguousarray(theta))
    with torch.no_grad():
        out = forward(system, th)
        params = unpack(system, th)
    target = out["u2"].detach()
    eh = effective_hessian(head_fn(system, th), lambda p: 0.5 * negative_cosine(p, target), out["z1"].detach(),
                           reading=reading)
    g, m = eh.gauss_newton(), eh.interaction()
    h = g + m
    jac = torch.func.jacrev(lambda z: head_fn(system, th)(z))(out["z1"].detach())
    pre = [out["z1"] @ params["P1"].T]
    if system.spec.pred_width:
        pre.append(out["u1"] @ params["Q1"].T)
    if system.spec.bn:  # the activation sees the normalised pre-activation
        pre = [(q - q.mean(0)) / torch.sqrt(q.var(0, unbiased=False) + system.spec.bn_eps) * params[f"{n}g"]
               + params[f"{n}b"] for q, n in zip(pre, "PQ")]
    pre_all = torch.cat([q.reshape(-1) for q in pre])
    h_norm = float(torch.linalg.matrix_norm(h))
    return {
        "max_abs_M": float(m.abs().max()), "max_abs_H": float(h.abs().max()),
        "M_over_H": float(torch.linalg.matrix_norm(m)) / h_norm if h_norm > 0 else math.nan,
        "lambda_min_H": float(torch.linalg.eigvalsh(h)[0]),
        "dead": bool((h == 0).all() and (jac == 0).all()),
        "active_fraction": float((pre_all > 0).double().mean()),
        "min_abs_preactivation": float(pre_all.abs().min()),
        "reading": reading, "row_wise_head": eh.row_wise_head,
    }
