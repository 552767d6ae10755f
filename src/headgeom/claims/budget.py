"""The training budget of a verdict as a fraction of the paper's (docs/paper.md §3).

A training verdict reached on a few hundred steps of a small data set says less than one on the
paper's 50 or 100 epochs of CIFAR-10; every training row therefore carries

    budget = {fraction, steps, batch, paper_steps, paper_batch, limited}

with fraction = (steps · batch) / (paper_steps · paper_batch), the images seen against the
paper's (a :class:`Budget`), and ``limited`` when the fraction is below :data:`LIMITED_BELOW` (the report then labels
the verdict ``budget-limited``). The paper's steps follow headgeom.train's epoch (whole batches,
the last partial batch dropped): paper_steps = epochs · ⌊n_train / batch⌋, e.g. 50 · ⌊50,000 / 512⌋
= 4,850 for the collapse grid (97 steps an epoch, as the paper's tracking per 97 steps says).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

LIMITED_BELOW = 0.25
LIMITED_LABEL = "budget-limited"
CIFAR10_TRAIN = 50_000


@dataclass(frozen=True)
class PaperBudget:
    """The paper's training run for an experiment: ``epochs`` of ``n_train`` images at ``batch``."""

    epochs: int
    batch: int
    n_train: int = CIFAR10_TRAIN
    source: str = ""  # where the paper says so, e.g. "docs/paper.md §3, SimCLR: 50 epochs, batch 256"

    @property
    def steps(self) -> int:
        return self.epochs * (self.n_train // self.batch)


@dataclass(frozen=True)
class Budget:
    """The ``budget`` entry of a claim row (module docstring): ``fraction`` = (steps · batch) / (paper_steps ·
    paper_batch), ``limited`` when it is below :data:`LIMITED_BELOW` (checked); ``paper``: where the paper's
    budget is stated; ``basis``: what the steps rest on when they are not the run's own log (the authors' runs)."""

    fraction: float
    steps: int
    batch: int
    paper_steps: int
    paper_batch: int
    limited: bool
    paper: str = ""
    basis: str | None = None

    def __post_init__(self) -> None:
        if bool(self.limited) != (self.fraction < LIMITED_BELOW):
            raise ValueError(f"budget limited={self.limited} but fraction {self.fraction:.3g} is "
                             f"{'below' if self.fraction < LIMITED_BELOW else 'at or above'} {LIMITED_BELOW}")

    @classmethod
    def from_json(cls, entry: Any, row_name: str = "?") -> Budget:
        """The budget of its JSON form; ValueError naming the row when a key of :data:`BUDGET_KEYS` is missing
        or its ``limited`` flag disagrees with its fraction."""
        if isinstance(entry, Budget):
            return entry
        missing = [k for k in BUDGET_KEYS if k not in entry] if isinstance(entry, dict) else list(BUDGET_KEYS)
        if missing:
            raise ValueError(f"claim row {row_name}: budget {entry!r} lacks {missing}; build it with "
                             "headgeom.claims.budget.budget(steps, batch, paper)")
        unknown = sorted(set(entry) - set(BUDGET_KEYS) - {"paper", "basis"})
        if unknown:
            raise ValueError(f"claim row {row_name}: budget has unknown keys {unknown}; it has {list(BUDGET_KEYS)}, "
                             "paper and basis")
        try:
            return cls(**entry)
        except ValueError as err:
            raise ValueError(f"claim row {row_name}: {err}") from err

    def to_json(self) -> dict[str, Any]:
        out = {"fraction": self.fraction, "steps": self.steps, "batch": self.batch, "paper_steps": self.paper_steps,
               "paper_batch": self.paper_batch, "limited": self.limited, "paper": self.paper}
        return out if self.basis is None else {**out, "basis": self.basis}


def budget(steps: int, batch: int, paper: PaperBudget) -> Budget:
    """The ``budget`` entry of a claim row trained for ``steps`` optimiser steps of ``batch`` images."""
    if steps < 0 or batch < 1:
        raise ValueError(f"a training budget needs steps >= 0 and batch >= 1; got steps={steps}, batch={batch}")
    fraction = steps * batch / (paper.steps * paper.batch)
    return Budget(fraction=fraction, steps=int(steps), batch=int(batch), paper_steps=paper.steps,
                  paper_batch=paper.batch, limited=fraction < LIMITED_BELOW, paper=paper.source)


BUDGET_KEYS = ("fraction", "steps", "batch", "paper_steps", "paper_batch", "limited")


def budget_of_cells(metrics: Iterable[dict[str, Any]], paper: PaperBudget) -> Budget | None:
    """The budget of a verdict from its cells' ``train_budget`` ({"steps", "batch"}, see
    ``headgeom.train.cells.run_training``): the smallest steps × batch of them (a verdict is as limited as
    its least-trained cell); None when no cell reports one."""
    seen = [m["train_budget"] for m in metrics if isinstance(m.get("train_budget"), dict)]
    if not seen:
        return None
    least = min(seen, key=lambda b: b["steps"] * b["batch"])
    return budget(int(least["steps"]), int(least["batch"]), paper)


def budget_text(b: Budget | None, label: bool = True) -> str:
    """E.g. "2.06% of the paper's budget (100 steps × 32 vs 4850 × 512), budget-limited" (the label
    left out with ``label=False``, where the verdict already carries it); "" for None."""
    if not b:
        return ""
    text = (f"{100.0 * b.fraction:.3g}% of the paper's budget ({b.steps} steps × {b.batch} vs "
            f"{b.paper_steps} × {b.paper_batch})")
    return text + (f", {LIMITED_LABEL}" if label and b.limited else "")
