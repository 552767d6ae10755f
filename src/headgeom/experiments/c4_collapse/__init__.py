"""C4, Thm 4.1 (collapse instability): exact spectra of G, M and H_eff where the theorem speaks and where
training goes.

States (docs/paper.md §2 C4, §3), built by :mod:`headgeom.theory.collapse`:

- ``equilibrium``: all N representations at one z̄ ~ z_scale · N(0, I_d), the head at its default init, targets
  chosen so that ∇_z L = J_hᵀρ = 0 exactly while ρ = ∇_u L ≠ 0 (ρ_i in the left null space of J_h, which an
  expander head k > d has): where the theorem speaks.
- ``scaled-equilibrium``: the same construction with the projector's Linear weights ×0.1.
- ``cifar10-init``: where training starts, measured. The first ``cifar_per_class`` CIFAR-10 test images of each
  class, two views of each from the paper's SimSiam recipe (crop (0.2, 1) + flip), the CIFAR ResNet-18 at init
  (width ``backbone_width``, BatchNorm in ``backbone_mode``: "train" is what the training loss sees at step 0),
  the paper's pseudo-collapsed head (Linear weights ×0.1) at the backbone's width. The *view gap* (the angle
  between the head outputs of one image's two views, :mod:`headgeom.theory.view_gap`) is measured over every
  image; the state analysed is z = the first ``cifar_samples`` images' first views with targets h(z2), and a gap
  sweep re-reads it with every target rotated to ``gap_multipliers`` × its own angle (exact, two evaluations).
  Without CIFAR-10 (the binary layout under the data folder, or ``$HEADGEOM_CIFAR10_JPEG``) its cells record
  where they looked and its rows say how to get it.
- ``pseudo-collapsed``: the same init at synthetic z ~ N(0, I) with second views z + view_noise · ε, over the
  sweep ``view_noises``: the gap is set here, not measured, and the sweep shows what each setting would decide.

Analyses (the ``reading`` axis), each a stated loss and a reading of its Hessian (``headgeom.geometry.engine.readings``):
``ambient`` and ``tangential`` read the SimSiam negative cosine loss −mean_i cos(u_i, sg(c_i)); ``mse`` is the
collapse theorem's premise as a loss, mean_i ½‖u_i − c_i‖², read ambient (its exact Hessian is I/N, and ρ in M is
its own, (u − c)/N). The loss is a batch mean, so blocks carry 1/N. Heads: Linear(d→hidden) → act →
Linear(hidden→k), bias-free like the paper's projector; ``linear`` has nothing between.

Each cell (activation × state × reading × seed) reports the exact per-sample block spectra (float64 eigh) of
H_eff, G and M, ‖M‖_F/‖H_eff‖_F, ‖∇_z L‖ (absolute and relative to ‖J‖₂‖ρ‖), the state's threshold ratio
r = λ_max(−G^{-1/2} M G^{-1/2}) (:mod:`headgeom.geometry.linalg.threshold`: past its own threshold when r > 1) and, when
N·d ≤ dense_max, the dense spectrum of the whole H_eff as a cross-check. Equilibrium cells of ``sweep_states``
also give the threshold in closed form, the sign change either side of it, and a bisection sweep over a log grid
of the design magnitude (``residual_range`` / ``angle_range``) as its cross-check
(:mod:`headgeom.theory.collapse_threshold`).

Rows (:mod:`headgeom.experiments.c4_collapse.summary`): identities at the equilibria (the theorem and the code),
tests at the measured init (tangential and MSE; the view gap in ``Row.view_gap``, every convention re-read),
diagnostics where a reading or a setting fixes the outcome (the ambient reading's G; the synthetic state's gap).
"""
from __future__ import annotations

from typing import Any

from headgeom.experiments.registry import Experiment, register
from headgeom.runs.cell import seeded_cells

from .config import (EQUILIBRIUM_STATES, MEASURED, NON_SMOOTH, READINGS, RESOURCES, STATES, SYNTHETIC, C4Config,
                     paper, quick, small, validate)
from .measure import CIFAR_KEYS, METRIC_KEYS, SWEEP_KEYS, build_head, data_cell, measure_point, run_cell
from .summary import summarize

__all__ = ["CIFAR_KEYS", "EQUILIBRIUM_STATES", "EXPERIMENT", "MEASURED", "METRIC_KEYS", "NON_SMOOTH", "READINGS",
           "STATEMENT", "STATES", "SWEEP_KEYS", "SYNTHETIC", "C4Config", "build_head", "cells", "measure_point",
           "paper", "quick", "run_cell", "small", "summarize"]

STATEMENT = ("Thm 4.1: at collapsed equilibria, smooth heads inject negative eigenvalues through M "
             "(saddle, escapable) once the residual passes a finite threshold; linear heads give H_eff ⪰ 0 "
             "under the MSE premise")


def cells(config: C4Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per activation × state × reading × seed; the measured state's cells also say where CIFAR-10 is
    (:func:`headgeom.experiments.c4_collapse.measure.data_cell`), read now."""
    validate(config)
    data = data_cell(config) if MEASURED in config.states else {}
    return seeded_cells("C4", [{"activation": a, "state": s, "reading": r, **(data if s == MEASURED else {})}
                               for a in config.activations for s in config.states for r in config.readings],
                        seeds, default=config.seeds)


EXPERIMENT = register(Experiment(
    id="C4",
    title="Collapse instability at constructed collapsed equilibria and at the measured init (Thm 4.1)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
))
