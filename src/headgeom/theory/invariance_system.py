"""The invariance system C6 and C7 study (Prop 5.2, Thm 5.3; docs/paper.md §2 C6, C7): its size per
preset, its two training regimes, and the cells (regime × seed) both experiments run.

C6 (Rayleigh quotients) and C7 (Fisher ranks) analyse the very same trained pattern-manifold
systems of :mod:`headgeom.theory.invariance` (``trained_system`` caches them per spec and seed),
so the specs, regimes and cells have this one home and both experiments read them from here.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from headgeom.theory.invariance import InvarianceSpec, PatternManifold, TrainedSystem, trained_system

__all__ = ["SYSTEMS", "REGIMES", "REGIME_FIELDS", "preset_system", "regime_spec", "regime_cells", "cell_system"]

SYSTEMS: dict[str, InvarianceSpec] = {
    # 12×12 patterns, 6 bumps, f 144-64-16, h 16-32-16 (SiLU), VICReg 300 steps
    "quick": InvarianceSpec(),
    # 16×16 patterns, 8 bumps, f 256-128-32, h 32-64-32, 600 steps
    "small": InvarianceSpec(size=16, n_content=8, hidden=128, d=32, head_hidden=64, k=32, steps=600, n_train=2048),
    # 24×24 patterns, 12 bumps, f 576-256-64, h 64-256-64, 2000 steps
    "paper": InvarianceSpec(size=24, n_content=12, hidden=256, d=64, head_hidden=256, k=64, steps=2000,
                            n_train=4096, batch=256),
}
"""The trained system of each preset (the paper has no such controlled experiment: ``paper`` only
scales ``quick`` up)."""

REGIMES = ("joint", "head_only")
"""``joint``: f and h trained; ``head_only``: f frozen at its random initialisation, h trained."""

REGIME_FIELDS = {"train_backbone": "each regime sets it (joint: f trained, head_only: f frozen at its init): "
                                   "choose the regimes instead, e.g. --set 'regimes=[\"head_only\"]'"}
"""The InvarianceSpec fields :func:`regime_spec` sets per cell, each with what to set instead of
``--set system.<field>`` (which C6 and C7 refuse: the cells would ignore it)."""


def preset_system(preset: str) -> InvarianceSpec:
    """The system of a preset (a key of :data:`SYSTEMS`)."""
    if preset not in SYSTEMS:
        raise ValueError(f"no invariance system for preset {preset!r}; choose one of {sorted(SYSTEMS)}")
    return SYSTEMS[preset]


def regime_spec(system: InvarianceSpec, regime: str) -> InvarianceSpec:
    """The system of one regime: ``joint`` trains f and h, ``head_only`` keeps f at its init."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; choose from {REGIMES}")
    return dataclasses.replace(system, train_backbone=(regime == "joint"))


def regime_cells(experiment: str, regimes: tuple[str, ...], seeds: int) -> list[dict[str, Any]]:
    """One cell per regime × seed, regimes outer (before and after training are one cell).

    ``experiment`` names the caller in the errors (``"C6"``, ``"C7"``).
    """
    if seeds < 1:
        raise ValueError(f"{experiment} needs at least one seed; got {seeds}: pass --seeds 1 or more")
    for r in regimes:
        if r not in REGIMES:
            raise ValueError(f"{experiment}: unknown regime {r!r}; choose from {REGIMES}")
    return [{"regime": r, "seed": s} for r in regimes for s in range(seeds)]


def cell_system(system: InvarianceSpec, cell: dict[str, Any]) -> tuple[InvarianceSpec, TrainedSystem, PatternManifold]:
    """What one regime × seed cell analyses: its spec, its trained system (cached per spec and
    seed by ``trained_system``: C6 and C7 share it) and its pattern manifold in float64."""
    spec = regime_spec(system, cell["regime"])
    seed = int(cell["seed"])
    return spec, trained_system(spec, seed), PatternManifold(spec, seed, torch.float64)
