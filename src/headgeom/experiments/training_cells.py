"""Shared pieces of the training experiments (C8, the collapse grid, the activation ablation, C12).

Not an experiment itself (``registry.NOT_EXPERIMENTS`` names it, so ``load_all`` skips it):
it wires :func:`headgeom.train.train` and :class:`headgeom.tracking.GeometryTracker` into one
cell, reads the run's metrics.jsonl back as a typed trajectory (:func:`headgeom.tracking.read_tracking`),
and holds the rules the verdicts use
(negative-curvature fraction, collapse escape, dead head), written once so every experiment
states the same criterion.

Where a cell trains: inside ``headgeom reproduce`` the run directory of the cell (the runner's
``<cell-key>/``) gets a ``train/`` sub-directory holding the ``headgeom train`` run (config.json,
metrics.jsonl, checkpoints), so a killed cell resumes its training and ``headgeom eval`` works on
it; outside the runner (tests, direct calls) it trains into a temporary directory that is removed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from headgeom.tracking.record import combine
from headgeom.tracking.tracker import GeometryTracker
from headgeom.tracking.trajectory import Trajectory, read_tracking

ESCAPE_DEFINITION = ("escaped = spread_final >= escape_level / sqrt(k) and collapsed_initially = spread_initial < "
                     "escape_level / sqrt(k), spread = mean per-dimension std (ddof=1) of the L2-normalised projector "
                     "outputs (width k) on the fixed probe batch (docs/paper.md §3; isotropic outputs give about 1/sqrt(k), "
                     "a collapsed head 0), initial = step 0, final = last tracking point; spread_ratio = final / initial "
                     "is reported beside it")
DEAD_DEFINITION = ("dead head (docs/paper.md §4 pitfall 8): H_eff = 0 exactly (max|lambda| = 0) at the last tracking "
                   "point and the projector spread frozen (relative change <= 1e-9) over the second half of the "
                   "tracking points; a dead head has no curvature at all, which is not 'no negative curvature'")


# ----------------------------------------------------------------------------- running a training cell
def cell_directory() -> Path | None:
    """The runner's directory of the cell being run (None outside ``headgeom reproduce``)."""
    from headgeom.experiments import runner

    return runner.current_run_dir()


@contextlib.contextmanager
def training_directory() -> Iterator[tuple[Path, bool]]:
    """(directory for the cell's ``headgeom train`` run, resume?): ``<cell>/train`` under the runner
    (resumed when a previous attempt wrote its config.json), else a temporary directory."""
    cell = cell_directory()
    if cell is not None:
        path = cell / "train"
        yield path, (path / "config.json").exists()
        return
    with tempfile.TemporaryDirectory(prefix="headgeom-cell-") as tmp:
        yield Path(tmp) / "train", False


class Trackers:
    """Several GeometryTrackers called as one ``tracker(step, method, probe_views)``: their records
    merged into one (one HeffReading per reading; the shared statistics are the same numbers),
    logged as its metrics.jsonl keys."""

    def __init__(self, trackers: Sequence[Any]) -> None:
        if not trackers:
            raise ValueError("Trackers needs at least one GeometryTracker")
        self.trackers = list(trackers)

    def __call__(self, step: int, method: torch.nn.Module, probe_views: Sequence[torch.Tensor]) -> dict[str, float]:
        return combine([tracker.measure(step, method, probe_views) for tracker in self.trackers]).metrics()


def run_training(config: Any, readings: Sequence[str], *, rel_floor: float = 1e-10, block_samples: int | None = 8,
                 after: Callable[[Path], dict[str, Any]] | None = None,
                 power_iterations: int | None = None) -> tuple[dict[str, Any], Trajectory, dict]:
    """Train ``config`` (a headgeom.train.TrainConfig) with H_eff tracking under each reading (none:
    no tracker; ``config.track_every`` sets the period).

    Returns (done.json of the run, its tracked steps read back from the run's metrics.jsonl
    (:func:`headgeom.tracking.read_tracking`, step 0 first), ``after(run_dir)`` evaluated while the
    run directory exists (or {})). A run stopped by a non-finite loss returns done = {"diverged":
    message, "final_loss": None}, its tracked steps up to the stop, and {} (``after`` is not called).
    Either way done["train_budget"] = {"steps", "batch"}: the steps the run was given (its stop step)
    and the global batch, which the experiments put in their cells' metrics for the verdict's budget
    (headgeom.report.budget). ``power_iterations`` also tracks the paper's float32 shifted-power
    λ_min estimate beside the exact one (GeometryTracker's option of that name).
    The training run's metrics.jsonl is the one record of the steps (written once by the loop); under
    the runner the run logs as ``headgeom reproduce --logger`` says (TrainConfig.logger; outside it,
    as ``config``)."""
    from headgeom.experiments.runner import current_train_logger
    from headgeom.train import NonFiniteLossError, train

    logger = current_train_logger()
    if logger is not None:
        config = dataclasses.replace(config, logger=logger)
    trackers = [GeometryTracker(every=1, reading=r, rel_floor=rel_floor, block_samples=block_samples,
                                power_iterations=power_iterations) for r in readings]
    with training_directory() as (run_dir, resume):
        try:  # an attempt killed before its first checkpoint starts again from step 0
            done = train(config, run_dir, resume_or_start=resume, tracker=Trackers(trackers) if trackers else None)
        except NonFiniteLossError as err:  # a diverged run is a result (e.g. lr 0.5 in the grid), not a crash
            done = {"diverged": str(err), "final_loss": None}
        planned = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        done["train_budget"] = {"steps": int(planned["stop_step"]), "batch": int(config.batch_size)}
        tracked = read_tracking(run_dir, strict=True)
        extra = after(run_dir) if after is not None and not done.get("diverged") else {}
    return done, tracked, extra


# ----------------------------------------------------------------------------- trajectories and rules
def negative_fraction(lambda_min: Sequence[float | None], floor: Sequence[float | None]) -> float | None:
    """Fraction of tracking points with λ_min < −floor (the tracker's floor at that point, rel_floor · max(max|λ|, S)),
    over the points where both are defined; None when there is none."""
    pairs = [(l, f) for l, f in zip(lambda_min, floor) if l is not None and f is not None]
    if not pairs:
        return None
    return sum(l < -f for l, f in pairs) / len(pairs)


def escape(spread: Sequence[float | None], k: int, escape_level: float) -> dict[str, Any]:
    """Initial/final projector spread, their ratio, and the collapse flags of ESCAPE_DEFINITION."""
    vals = [s for s in spread if s is not None]
    if not vals:
        return {"spread_initial": None, "spread_final": None, "spread_ratio": None, "escaped": None,
                "collapsed_initially": None}
    first, last = vals[0], vals[-1]
    level = escape_level / math.sqrt(k)
    ratio = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    return {"spread_initial": first, "spread_final": last, "spread_ratio": ratio, "escaped": bool(last >= level),
            "collapsed_initially": bool(first < level)}


def dead_head(lambda_min: Sequence[float | None], lambda_max: Sequence[float | None],
              spread: Sequence[float | None]) -> bool:
    """DEAD_DEFINITION: zero H_eff at the last point and the spread frozen over the second half."""
    if not lambda_min or lambda_min[-1] is None or lambda_max[-1] is None:
        return False
    if max(abs(lambda_min[-1]), abs(lambda_max[-1])) != 0.0:
        return False
    tail = [s for s in spread[len(spread) // 2:] if s is not None]
    if len(tail) < 2:
        return False
    ref = max(abs(tail[0]), 1e-300)
    return all(abs(s - tail[0]) <= 1e-9 * ref for s in tail)


def collapse_outcome(out: dict[str, Any], config: Any, done: dict[str, Any],
                     lambda_min: Sequence[float | None], lambda_max: Sequence[float | None]) -> None:
    """Write a run's escape flags (ESCAPE_DEFINITION), dead-head flag and divergence into ``out``;
    a run stopped by a non-finite loss leaves escape undecided."""
    out.update(escape(out["spread_projector"], config.out_dim, config.escape_level))
    out["dead_head"] = dead_head(lambda_min, lambda_max, out["spread_projector"])
    out["diverged"] = done.get("diverged")
    if out["diverged"]:
        out["escaped"] = None


def fraction(flags: Sequence[bool]) -> float | None:
    return sum(bool(f) for f in flags) / len(flags) if flags else None


def contrast_verdict(positive: dict[str, list[bool]], negative: dict[str, list[bool]],
                     majority: float) -> tuple[str, str]:
    """Verdict of "every ``positive`` group shows the effect and no ``negative`` group does".

    Each group maps to one flag per seed (effect seen or not; dead or undefined seeds already
    removed). Returns (verdict, reason)."""
    empty = [g for g, flags in {**positive, **negative}.items() if not flags]
    if not positive or not negative or empty:
        return "inconclusive", f"groups without usable seeds: {empty or 'a side has no group'}"
    pos = {g: fraction(f) for g, f in positive.items()}
    neg = {g: fraction(f) for g, f in negative.items()}
    if any(v == 0 for v in pos.values()) or any(v >= majority for v in neg.values()):
        return "not supported", f"effect fractions: expected {pos}, not expected {neg}"
    if all(v >= majority for v in pos.values()) and all(v <= 1 - majority for v in neg.values()):
        return "supported", f"effect fractions: expected {pos}, not expected {neg}"
    return "inconclusive", f"effect fractions: expected {pos}, not expected {neg}"


CONTRAST_RULE = ("supported if every group where the effect is expected shows it in >= {maj:.0%} of its seeds and "
                 "every group where it is not expected shows it in <= {rest:.0%} of its seeds; not supported if an "
                 "expected group never shows it or a not-expected group shows it in >= {maj:.0%} of its seeds; "
                 "inconclusive otherwise or when a group has no usable seed")


def contrast_rule(majority: float) -> str:
    return CONTRAST_RULE.format(maj=majority, rest=1 - majority)


def pm(values: Sequence[float | None], fmt: str = ".3g") -> str:
    """'mean ± std (n)' of the defined values, '-' when none."""
    from headgeom.experiments.registry import measured

    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return "-"
    m = measured(xs)
    return f"{m['value']:{fmt}} ± {m['spread']:.2g} ({m['n']})"
