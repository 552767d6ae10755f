"""The escape rule of C5 and C8 (docs/paper.md §2 C5, C8, §3.3): does a collapsed head escape, judged as a
contrast of groups of runs, written once for headgeom's collapse grid and C8 (headgeom.experiments.collapse_grid,
headgeom.experiments.c8_hessian_tracking) and the authors' released collapse grids
(headgeom.experiments.released_results).

Each run is a spread series with the projector's output width k. Its outcome
(:func:`~headgeom.claims.training_verdicts.run_escape`, ESCAPE_DEFINITION) is judged against one
head-independent reference, the level ``collapse_fraction / sqrt(k)``, and read two ways: the level reached
(final >= level) and growth from the start (final / initial >= ``growth``). Only runs that pass the one
inclusion rule (:func:`~headgeom.claims.training_verdicts.usable_escape`: collapsed at the start, not diverged,
not dead) give a flag. For each reading the groups where escape is expected are contrasted with those where it
is not (:func:`~headgeom.claims.training_verdicts.contrast_verdict`); the row's verdict is the two readings'
verdict where they agree, and inconclusive where they do not.

The verdict depends on three conventions, each re-judged from the stored series over a stated range
(:func:`headgeom.claims.robustness.sweep_grid`): the collapse fraction (:data:`FRACTIONS`), the growth factor
(:data:`GROWTHS`) and the majority of seeds (:data:`MAJORITIES`). Pure functions of the runs' series.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from headgeom.claims.estimates import measured
from headgeom.claims.robustness import Robustness, sweep_grid
from headgeom.claims.training_verdicts import (COLLAPSE_FRACTION, DEAD_DEFINITION, ESCAPE_DEFINITION, GROWTH,
                                               MAJORITIES, contrast_rule, contrast_verdict, fraction, run_escape,
                                               usable_escape)
from headgeom.claims.verdict import INCONCLUSIVE, Verdict
from headgeom.eval.rankme import uniform_spread

__all__ = ["COLLAPSE_FRACTION", "CONVENTIONS", "FRACTIONS", "GROWTH", "GROWTHS", "MAJORITIES", "MAJORITY",
           "READINGS", "EscapeJudgement", "c5_parts", "escape_flags", "escape_verdict", "headline_text", "judge_escape",
           "run_name"]

MAJORITY = 0.8
READINGS = ("level", "growth")  # the level reached; growth from the start
FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)  # the collapse fractions swept (of 1/sqrt(k))
GROWTHS = (1.25, 1.5, 2.0, 3.0, 5.0)  # the growth factors swept
CONVENTIONS = ("collapse_fraction", "growth", "majority")


def run_name(act: str, bn: bool, lr: float) -> str:
    """The name of a grid run, e.g. "relu/nobn/lr=0.005" (a group of the contrast)."""
    return f"{act}/{'bn' if bn else 'nobn'}/lr={lr:g}"


def c5_parts(runs: Sequence[tuple[str, bool, float]]) -> list[tuple[str, list[str], list[str]]]:
    """C5's two contrasts as (part, groups where escape is expected, groups where it is not), from the grid's
    (activation, bn, lr) runs: without BN at the smallest step size (the gradient-flow proxy) a smooth (SiLU)
    head escapes and a ReLU head does not; ReLU escapes through BN (at every step size) or the largest
    step size, not without BN at the smallest (a grid of one step size has no large one: that group is left out,
    so no group is both expected and not expected).

    The first contrast is read at the smallest step size at which the grid holds both a SiLU and a ReLU run
    without BN (the authors' ViT-Tiny grid has SiLU at lr 0.05 only), and the part says so where that is not
    the grid's smallest; where no step size holds both, at the smallest, and the missing group decides."""
    lrs = sorted({float(lr) for _, _, lr in runs})
    lo, hi = lrs[0], lrs[-1]
    nobn = {(a, float(lr)) for a, bn, lr in runs if not bn}
    both = [lr for lr in lrs if ("silu", lr) in nobn and ("relu", lr) in nobn]
    flow = both[0] if both else lo
    where = "" if flow == lo else f"; the grid's smallest at which it holds SiLU and ReLU runs without BN"
    return [(f"smallest step size without BN (lr {flow:g}, the gradient-flow proxy{where})",
             [run_name("silu", False, flow)], [run_name("relu", False, flow)]),
            ("ReLU escapes through BN or a large step size",
             [run_name("relu", True, lr) for lr in lrs] + [run_name("relu", False, hi)] * (hi > lo),
             [run_name("relu", False, lo)])]


def _outcomes(runs: list[dict[str, Any]], collapse_fraction: float, growth: float) -> list[dict[str, Any]]:
    return [{**run_escape(m, collapse_fraction, growth), "dead_head": m.get("dead_head")} for m in runs]


def escape_flags(runs: list[dict[str, Any]], reading: str, collapse_fraction: float = COLLAPSE_FRACTION,
                 growth: float = GROWTH) -> list[bool]:
    """One flag per run that passes the inclusion rule: escaped under ``reading`` ("level": the level reached;
    "growth": final / initial >= growth). ``runs``: dicts with ``spread_projector``, ``out_dim`` and, where
    known, ``diverged`` and ``dead_head``."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}; got {reading!r}")
    key = "escaped" if reading == "level" else "grew"
    return [bool(o[key]) for o in _outcomes(runs, collapse_fraction, growth) if usable_escape(o)]


def _deciding(pos: dict[str, list[bool]], neg: dict[str, list[bool]], majority: float, key: str) -> str:
    """The measured key that decided :func:`~headgeom.claims.training_verdicts.contrast_verdict` on these flags, in
    its order: an expected group that never escapes, a not-expected group that escapes in the majority, a group
    with no usable seed (its count of seeds collapsed at the start), a group short of the rule, else the first
    expected group."""
    both = {**pos, **neg}
    checks = ([g for g, f in pos.items() if f and fraction(f) == 0]
              + [g for g, f in neg.items() if f and fraction(f) >= majority])
    if checks:
        return f"{key}[{checks[0]}]"
    empty = [g for g, f in both.items() if not f]
    if empty:
        return f"collapsed_at_start_seeds[{empty[0]}]"
    short = ([g for g, f in pos.items() if fraction(f) < majority]
             + [g for g, f in neg.items() if fraction(f) > 1 - majority])
    return f"{key}[{(short or list(both))[0]}]"


def escape_verdict(groups: Mapping[str, list[dict[str, Any]]], positive: list[str], negative: list[str], *,
                   collapse_fraction: float, growth: float, majority: float) -> Verdict:
    """The contrast "escape in every ``positive`` group and in no ``negative`` one" under both readings; the
    verdict where they agree, else inconclusive (module docstring). The headline is the measured key that decided
    the level reading (:func:`_deciding`), or the growth reading's where only that one failed."""
    seen, keys = {}, {}
    for reading, key in zip(READINGS, ("escaped", "grew")):
        def side(names: list[str]) -> dict[str, list[bool]]:
            return {g: escape_flags(groups.get(g, []), reading, collapse_fraction, growth) for g in names}
        pos, neg = side(positive), side(negative)
        seen[reading] = contrast_verdict(pos, neg, majority)
        keys[reading] = _deciding(pos, neg, majority, key)
    (level, why_level), (grew, why_grew) = seen["level"], seen["growth"]
    reason = f"level reached: {level} ({why_level}); growth: {grew} ({why_grew})"
    headline = keys["growth"] if level == "supported" and grew != "supported" else keys["level"]
    if level != grew:
        return Verdict(INCONCLUSIVE, headline, reason + "; the two readings disagree")
    return Verdict(level, headline, reason)


def headline_text(headline: str, collapse_fraction: float, growth: float) -> str:
    """The escape row's headline in words."""
    kind, group = headline[:-1].split("[", 1)
    return {"escaped": f"share of the collapsed {group} seeds whose spread reaches {collapse_fraction:g}/sqrt(k)",
            "grew": f"share of the collapsed {group} seeds whose spread grows {growth:g}x",
            "collapsed_at_start_seeds": f"seeds of {group} under the level at the start (the group has no usable seed)",
            }[kind]


@dataclass(frozen=True)
class EscapeJudgement:
    """An escape row's verdict, measured entries, criterion, conventions and their robustness."""

    verdict: Verdict
    measured: dict[str, Any]
    criterion: str
    conventions: tuple[str, ...]
    robustness: dict[str, Robustness]
    headline_text: str


def _group_measured(name: str, runs: list[dict[str, Any]], collapse_fraction: float, growth: float) -> dict[str, Any]:
    outs = _outcomes(runs, collapse_fraction, growth)
    usable = [o for o in outs if usable_escape(o)]
    nan = float("nan")

    def over_uniform(key: str) -> list[float]:
        return [o[key] / uniform_spread(int(m["out_dim"])) for o, m in zip(outs, runs)
                if o[key] is not None and m.get("out_dim")]
    return {
        f"escaped[{name}]": measured([float(o["escaped"]) for o in usable] or nan, n=len(usable),
                                     what="fraction of the seeds collapsed at the start whose final spread reaches the "
                                          "level collapse_fraction/sqrt(k)"),
        f"grew[{name}]": measured([float(o["grew"]) for o in usable] or nan, n=len(usable),
                                  what=f"fraction of the seeds collapsed at the start whose spread grew >= {growth:g}x"),
        f"collapsed_at_start_seeds[{name}]": measured(float(sum(bool(o["collapsed_initially"]) for o in outs)),
                                                      n=len(outs), what="seeds under the level at the start"),
        f"initial_over_uniform[{name}]": measured(over_uniform("spread_initial") or nan,
                                                  what="initial spread x sqrt(k): its fraction of the uniform spread"),
        f"final_over_uniform[{name}]": measured(over_uniform("spread_final") or nan,
                                                what="final spread x sqrt(k): its fraction of the uniform spread"),
        f"initial_over_reference[{name}]": measured(
            [o["spread_initial"] / m["spread_reference"] for o, m in zip(outs, runs)
             if m.get("spread_reference") and o["spread_initial"] is not None] or nan,
            what="initial spread over the same head's spread at normal init (what the collapse did; context)"),
        f"spread_ratio[{name}]": measured([o["spread_ratio"] for o in outs if o["spread_ratio"] is not None] or nan,
                                          what="final / initial spread"),
        f"dead_seeds[{name}]": measured(float(sum(bool(m.get("dead_head")) for m in runs)), n=len(runs)),
    }


def judge_escape(groups: Mapping[str, list[dict[str, Any]]], positive: list[str], negative: list[str], *,
                 collapse_fraction: float = COLLAPSE_FRACTION, growth: float = GROWTH,
                 majority: float = MAJORITY) -> EscapeJudgement:
    """The escape row of "escape in every ``positive`` group and in no ``negative`` one" (module docstring).

    ``groups``: group name -> one run per seed ({"spread_projector", "out_dim", "diverged", "dead_head",
    "spread_reference" (optional)}). The headline is the measured key that decided the verdict
    (:func:`escape_verdict`)."""
    names = list(dict.fromkeys(positive + negative))
    if not names:
        raise ValueError("an escape row contrasts at least one group; got none")
    meas: dict[str, Any] = {}
    for g in names:
        meas.update(_group_measured(g, groups.get(g, []), collapse_fraction, growth))

    def rule(f: float = collapse_fraction, gr: float = growth, maj: float = majority) -> Verdict:
        return escape_verdict(groups, positive, negative, collapse_fraction=f, growth=gr, majority=maj)
    verdict = rule()
    robustness = {"collapse_fraction": sweep_grid(lambda f: rule(f=f), collapse_fraction, FRACTIONS),
                  "growth": sweep_grid(lambda g: rule(gr=g), growth, GROWTHS),
                  "majority": sweep_grid(lambda m: rule(maj=m), majority, MAJORITIES)}
    criterion = (f"{ESCAPE_DEFINITION}; collapse_fraction = {collapse_fraction:g}, growth = {growth:g}; escape "
                 f"expected in {positive}, not expected in {negative}; under each reading, " + contrast_rule(majority)
                 + "; the row's verdict is the two readings' verdict where they agree, inconclusive where they do not; "
                 f"dead seeds left out ({DEAD_DEFINITION}). Robustness: re-judged from the stored spread series at "
                 f"collapse_fraction {list(FRACTIONS)}, growth {list(GROWTHS)}, majority {list(MAJORITIES)}. "
                 f"Outcome: {verdict.reason}")
    return EscapeJudgement(verdict, meas, criterion, CONVENTIONS, robustness,
                           headline_text(verdict.headline, collapse_fraction, growth))
