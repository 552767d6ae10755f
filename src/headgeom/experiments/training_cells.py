"""Shared pieces of the training experiments (C8, the collapse grid, the activation ablation, C12).

Not an experiment itself (``registry.NOT_EXPERIMENTS`` names it, so ``load_all`` skips it):
it wires :func:`headgeom.train.train` and :class:`headgeom.tracking.GeometryTracker` into one
cell, reads the run's metrics.jsonl back as trajectories, and holds the rules the verdicts use
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

from headgeom.runs.metrics import read_metrics

ESCAPE_DEFINITION = ("escaped = spread_final >= escape_level / sqrt(k) and collapsed_initially = spread_initial < "
                     "escape_level / sqrt(k), spread = mean per-dimension std (ddof=1) of the L2-normalised projector "
                     "outputs (width k) on the fixed probe batch (docs/paper.md §3; isotropic outputs give about 1/sqrt(k), "
                     "a collapsed head 0), initial = step 0, final = last tracking point; spread_ratio = final / initial "
                     "is reported beside it")
DEAD_DEFINITION = ("dead head (docs/paper.md §4 pitfall 8): H_eff = 0 exactly (max|lambda| = 0) at the last tracking "
                   "point and the projector spread frozen (relative change <= 1e-9) over the second half of the "
                   "tracking points; a dead head has no curvature at all, which is not 'no negative curvature'")


# ----------------------------------------------------------------------------- heads
def paper_head(activation: str, hidden: int, out: int, bn: bool = False) -> str:
    """The paper's projector (docs/paper.md §3) as a head string with the first width filled in by the
    backbone: Linear(d→hidden, no bias) → [BN] → act → Linear(hidden→out, no bias) → [BN];
    ``linear`` = the two Linears with nothing between."""
    return f"d-{hidden}-{out}:{activation}:nobias" + (":bn:last=bn" if bn else "")


def paper_predictor(activation: str, hidden: int, out: int, bn: bool = False) -> str:
    """The collapse grid's predictor out→hidden→out (paper 2048→512→2048) with the projector's
    activation, BN on the hidden layer when the projector has BN (SimSiam's predictor), no bias."""
    return f"d-{hidden}-{out}:{activation}:nobias" + (":bn" if bn else "")


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
    """Several GeometryTrackers called as one ``tracker(step, method, probe_views)``; their keys
    are prefixed by reading (``heff_<reading>_...``), the shared statistics are the same numbers."""

    def __init__(self, trackers: Sequence[Any]) -> None:
        if not trackers:
            raise ValueError("Trackers needs at least one GeometryTracker")
        self.trackers = list(trackers)

    def __call__(self, step: int, method: torch.nn.Module, probe_views: Sequence[torch.Tensor]) -> dict[str, float]:
        out: dict[str, float] = {}
        for tracker in self.trackers:
            out.update(tracker(step, method, probe_views, force=True))
        return out


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/metrics.jsonl`` (headgeom.train's log, read by
    :func:`headgeom.runs.metrics.read_metrics`), in order, as the dicts the series below read."""
    return [rec.as_dict() for rec in read_metrics(run_dir, strict=True)]


def run_training(config: Any, readings: Sequence[str], *, rel_floor: float = 1e-10, block_samples: int | None = 8,
                 after: Callable[[Path], dict[str, Any]] | None = None,
                 power_iterations: int | None = None) -> tuple[dict[str, Any], list[dict], dict]:
    """Train ``config`` (a headgeom.train.TrainConfig) with H_eff tracking under each reading (none:
    no tracker; ``config.track_every`` sets the period).

    Returns (done.json of the run, the tracking records (lines of metrics.jsonl with a tracked key,
    step 0 first), ``after(run_dir)`` evaluated while the run directory exists (or {})). A run stopped
    by a non-finite loss returns done = {"diverged": message, "final_loss": None}, its records up to
    the stop, and {} (``after`` is not called). Either way done["train_budget"] = {"steps", "batch"}:
    the steps the run was given (its stop step) and the global batch, which the experiments put in
    their cells' metrics for the verdict's budget (headgeom.report.budget). ``power_iterations``
    also tracks the paper's float32 shifted-power λ_min estimate beside the exact one
    (GeometryTracker's option of that name).
    Each tracking record is also logged to the runner's metrics.jsonl of the cell. Under the runner
    the run logs as ``headgeom reproduce --logger`` says (TrainConfig.logger; outside it, as ``config``)."""
    from headgeom.experiments.runner import current_train_logger, log_metrics
    from headgeom.tracking import GeometryTracker
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
        records = [r for r in read_records(run_dir) if "spread_projector" in r or any(k.startswith("heff_") for k in r)]
        extra = after(run_dir) if after is not None and not done.get("diverged") else {}
    for rec in records:
        log_metrics(rec)
    return done, records, extra


# ----------------------------------------------------------------------------- trajectories and rules
def series(records: list[dict[str, Any]], key: str) -> list[float | None]:
    """The value of ``key`` at every tracking record (None where the tracker left it out)."""
    out = []
    for rec in records:
        v = rec.get(key)
        out.append(float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None)
    return out


def heff_series(records: list[dict[str, Any]], reading: str, name: str) -> tuple[list[float | None], str]:
    """The tracker's H_eff quantity ``name`` (lambda_min, lambda_max, n_negative, floor, M_ratio_fro, ...)
    under ``reading`` at every record, and where it came from: ``blocks`` (exact per-sample blocks,
    key ``heff_<reading>_mean_<name>``) or ``operator`` (the tracker's Lanczos estimate on the whole
    coupled H_eff, key ``heff_<reading>_mean_op_<name>``, used for train-mode BatchNorm heads)."""
    p = f"heff_{reading}_mean_"
    if any(p + name in r for r in records):
        return series(records, p + name), "blocks"
    if any(p + "op_" + name in r for r in records):
        return series(records, p + "op_" + name), "operator"
    return [None] * len(records), "absent"


def m_ratio_series(records: list[dict[str, Any]], reading: str) -> tuple[list[float | None], str]:
    """‖M‖/‖H_eff‖ per record: Frobenius when the tracker gives it, else spectral; (values, "<norm> (<source>)")."""
    for norm in ("fro", "spectral"):
        values, source = heff_series(records, reading, f"M_ratio_{norm}")
        if source != "absent":
            return values, f"{norm} ({source})"
    return [None] * len(records), "absent"


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


def simsiam_train_config(config: Any, activation: str, seed: int, *, bn: bool = False,
                         lr: float | None = None, pseudo_collapse: float | None = None,
                         schedule: str = "cosine"):
    """The headgeom.train.TrainConfig of one SimSiam cell of the training experiments: the
    paper's projector/predictor templates, SGD without weight decay, no normalisation (docs/paper.md §3)."""
    from headgeom.train import TrainConfig

    return TrainConfig(
        method="simsiam", backbone="resnet18", backbone_options={"width": config.width},
        head=paper_head(activation, config.hidden, config.out_dim, bn),
        predictor=paper_predictor(activation, config.pred_hidden, config.out_dim, bn),
        pseudo_collapse=pseudo_collapse, method_options={"recipe": "paper_simsiam"}, data=config.data,
        data_dir=config.data_dir, data_options=dict(config.data_options), image_size=config.image_size,
        normalize=False, epochs=config.epochs, max_steps=config.max_steps, batch_size=config.batch_size,
        seed=seed, optimizer="sgd", lr=config.lr if lr is None else lr, momentum=config.momentum,
        weight_decay=0.0, schedule=schedule, track_every=config.track_every, probe_size=config.probe_size,
        device=config.device, progress=False,
    )


def simclr_train_config(config: Any, head: str, seed: int, *, backbone: str = "resnet18",
                        backbone_options: dict[str, Any] | None = None, weight_decay: float | None = None,
                        image_size: int | None = None):
    """The headgeom.train.TrainConfig of one cell trained with the paper's SimCLR (C9, C11, C12):
    the one-directional InfoNCE at ``config.temperature``, Adam at ``config.lr`` with a constant
    schedule (docs/paper.md §3). ``backbone_options`` default to ``{"width": config.width}``,
    ``weight_decay`` to ``config.weight_decay``."""
    from headgeom.train import TrainConfig

    return TrainConfig(
        method="simclr_oneway", backbone=backbone,
        backbone_options={"width": config.width} if backbone_options is None else backbone_options,
        head=head, method_options={"temperature": config.temperature}, data=config.data,
        data_dir=config.data_dir, data_options=dict(config.data_options), image_size=image_size,
        epochs=config.epochs, max_steps=config.max_steps, batch_size=config.batch_size, seed=seed,
        optimizer="adam", lr=config.lr,
        weight_decay=config.weight_decay if weight_decay is None else weight_decay,
        schedule="constant", device=config.device, progress=False,
    )


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
