"""Optimizers for SSL pre-training: SGD, Adam, AdamW and LARS, built on a method's param groups.

Weight-decay exclusions come from ``method.param_groups(weight_decay)`` (biases and norm
parameters get no decay, as the official SimCLR/BYOL/VICReg/Barlow Twins/DINO code). LARS
additionally skips the trust-ratio adaptation for 1-D parameters, as the official Barlow Twins
and VICReg ``LARS`` with ``exclude_bias_and_norm`` (which copy BYOL's optax LARS).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["LARS", "OPTIMIZERS", "build_optimizer"]

OPTIMIZERS = ("sgd", "adam", "adamw", "lars")


class LARS(torch.optim.Optimizer):
    """LARS (You et al. 2017) in the form of the official Barlow Twins / VICReg code.

    For each parameter ``p`` with gradient ``g`` of a group (lr, momentum m, weight_decay wd,
    eta, lars_exclude)::

        d = g + wd·p
        if not lars_exclude:  d = d · (eta·‖p‖/‖d‖  if ‖p‖ > 0 and ‖d‖ > 0 else 1)
        mu = m·mu + d;  p = p - lr·mu

    Groups flagged ``lars_exclude`` (biases, norm parameters) take plain SGD-momentum steps.
    """

    def __init__(self, params: Iterable[Any], lr: float = 0.0, momentum: float = 0.9,
                 weight_decay: float = 0.0, eta: float = 0.001) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0 or eta <= 0:
            raise ValueError(f"LARS needs lr >= 0, momentum >= 0, weight_decay >= 0 and eta > 0; got "
                             f"lr={lr}, momentum={momentum}, weight_decay={weight_decay}, eta={eta}")
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta,
                        lars_exclude=False)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                if g["weight_decay"] != 0:
                    d = d.add(p, alpha=g["weight_decay"])
                if not g["lars_exclude"]:
                    p_norm, d_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(d)
                    one = torch.ones_like(p_norm)
                    q = torch.where(p_norm > 0, torch.where(d_norm > 0, g["eta"] * p_norm / d_norm, one), one)
                    d = d.mul(q)
                state = self.state[p]
                if "mu" not in state:
                    state["mu"] = torch.zeros_like(p)
                mu = state["mu"]
                mu.mul_(g["momentum"]).add_(d)
                p.add_(mu, alpha=-g["lr"])
        return loss


def _split_for_lars(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group split into its >= 2-D parameters (adapted) and 1-D ones (``lars_exclude``)."""
    out = []
    for g in groups:
        params = list(g["params"])
        for exclude, sel in ((False, [p for p in params if p.ndim > 1]),
                             (True, [p for p in params if p.ndim <= 1])):
            if sel:
                name = g.get("name", "params") + ("_lars_excluded" if exclude else "")
                out.append({**g, "params": sel, "name": name, "lars_exclude": exclude})
    return out


def build_optimizer(name: str, groups: list[dict[str, Any]], lr: float, momentum: float = 0.9,
                    weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                    eta: float = 0.001) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``groups`` (e.g. ``method.param_groups(weight_decay)``; each a
    dict with ``params`` and usually ``weight_decay`` and ``name``). ``lr`` is the initial rate;
    the loop overwrites every group's ``lr`` with the schedule before each step.

    ``adamw`` uses decoupled decay (Loshchilov & Hutter 2019), ``adam`` adds ``wd·p`` to the
    gradient (L2), as torch does.
    """
    groups = [dict(g) for g in groups]
    for g in groups:
        g["params"] = [p for p in g["params"] if p.requires_grad]
        g.setdefault("weight_decay", weight_decay)
    groups = [g for g in groups if g["params"]]
    if not groups:
        raise ValueError("no trainable parameters: every parameter group is empty or frozen")
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, weight_decay=weight_decay)
    if name == "lars":
        return LARS(_split_for_lars(groups), lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
