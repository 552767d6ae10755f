"""C4 where training starts: the paper's pseudo-collapsed init measured on CIFAR-10 (a test under the tangential
and MSE readings, a diagnostic under the ambient one) and the synthetic init swept over its view noise (a
diagnostic). Each verdict is a pure function of what the cells stored, so every convention is re-read over a
stated range (:mod:`headgeom.claims.robustness`)."""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable

from headgeom.claims.collapse_instability import AMBIENT_G, FLOORS, MAJORITIES, flags_verdict, state_flag
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import DIAGNOSTIC, TEST, has_data
from headgeom.claims.robustness import sweep
from headgeom.claims.row import NOT_MEASURED, Row
from headgeom.claims.verdict import Verdict

from .config import MEASURED, NON_SMOOTH, SYNTHETIC, C4Config
from .rows import HEADLINE, Groups, row_setting

__all__ = ["absent_message", "entry", "measured_claim", "measured_gap", "synthetic_claim",
           "synthetic_index"]



def _measured_cells(groups: Groups, reading: str, acts: list[str]) -> dict[str, list[dict]]:
    return {a: [m for m in groups.get((MEASURED, reading, a), []) if m.get("status") == "measured"] for a in acts}


def absent_message(groups: Groups) -> str | None:
    for (state, _, _), ms in groups.items():
        for m in ms:
            if state == MEASURED and m.get("status") == "absent":
                return m.get("message")
    return None


def entry(m: dict, multiplier: float) -> dict:
    return next(s for s in m["gap_sweep"] if s["multiplier"] == multiplier)


def _flag(entry: dict) -> bool | None:
    return None if entry["n_negative_G"] > 0 else bool(entry["n_negative_H"] > 0)


def _gap_measured(cells: list[dict], key: str = "view_gap_deg", **extra: Any) -> Any:
    """The angles of every image of ``cells`` pooled: mean ± std over images, in degrees."""
    angles = [v for m in cells for v in m[key]]
    return measured(angles or float("nan"), n=len(angles), unit="degrees", spread_kind="std over images (ddof=1)",
                    seeds=len(cells), **extra)


def measured_gap(groups: Groups) -> float | None:
    """The mean view gap (degrees) over every measured cell of a smooth head (the heads the rows judge; each row
    also reports its own), None without one."""
    angles = [v for (state, _, act), ms in groups.items() if state == MEASURED and act not in NON_SMOOTH for m in ms
              if m.get("status") == "measured" for v in m["view_gap_deg"]]
    return sum(angles) / len(angles) if angles else None


def _robustness(config: C4Config, cells: dict[str, list[dict]]) -> tuple[dict[str, Any], Callable[..., Verdict]]:
    """The measured-init rule re-read over each convention (the cells stored what it needs), and the rule."""
    def rule(multiplier: float = 1.0, rel_floor: float | None = None, majority: float = config.majority,
             n: int | None = None) -> Verdict:
        flags = {}
        for a, ms in cells.items():
            if rel_floor is None and n is None:
                flags[a] = [_flag(entry(m, multiplier)) for m in ms]
            else:
                one = [entry(m, 1.0) for m in ms]
                flags[a] = [state_flag(e["per_block"], e["operand_scale"], config.rel_floor if rel_floor is None
                                       else rel_floor, n) for e in one]
        return flags_verdict(flags, majority, HEADLINE)

    n = min((len(entry(m, 1.0)["per_block"]["H_lambda_min"]) for ms in cells.values() for m in ms),
            default=config.cifar_samples)  # the blocks each state stored
    sizes = sorted({1, 2, 4, n // 2 or 1, n} & set(range(1, n + 1)))
    return {"view_gap": sweep(lambda s: rule(multiplier=s), 1.0, config.gap_multipliers),
            "rel_floor": sweep(lambda f: rule(rel_floor=f), config.rel_floor, sorted({*FLOORS, config.rel_floor})),
            "majority": sweep(lambda q: rule(majority=q), config.majority, sorted({*MAJORITIES, config.majority})),
            "state_samples": sweep(lambda k: rule(n=k), n, sizes)}, rule


def _indefinite_text(cells: dict[str, list[dict]], smooth: list[str]) -> str:
    """'measured: G indefinite in a of b seeds of the linear/ReLU heads, c of d of the smooth heads'."""
    def count(acts: list[str]) -> tuple[int, int]:
        flags = [entry(m, 1.0)["n_negative_G"] > 0 for a in acts for m in cells[a]]
        return sum(flags), len(flags)

    parts = [f"{i} of {n} seeds of the {what} heads" for what, acts in
             (("linear/ReLU", [a for a in cells if a not in smooth]), ("smooth", smooth)) if acts
             for i, n in [count(acts)]]
    return "measured: G indefinite in " + ", ".join(parts) + " (a seed with G indefinite cannot attribute negative " \
           "curvature to M and is left out)"


def measured_claim(config: C4Config, groups: Groups, reading: str) -> Row | None:
    """The init on CIFAR-10 under ``reading``: a test (tangential, MSE) or, under the ambient reading, a diagnostic."""
    acts = [a for a in config.activations if (MEASURED, reading, a) in groups]
    smooth = [a for a in acts if a not in NON_SMOOTH]
    if not smooth:
        return None
    cells = _measured_cells(groups, reading, acts)
    kind = DIAGNOSTIC if reading == "ambient" else TEST
    d = next((m["point"]["d"] for ms in cells.values() for m in ms), round(512 * config.backbone_width))
    widths = (d, config.cifar_hidden, config.cifar_k)
    setting = {**row_setting(config, MEASURED, reading, acts, widths, config.cifar_samples),
               "data": "CIFAR-10 test images", "backbone": f"CIFAR ResNet-18 width {config.backbone_width:g} at init "
               f"(BatchNorm in {config.backbone_mode} mode)", "views": f"{config.recipe} (the paper's SimSiam recipe)",
               "construction": (f"z = the backbone's representations of a first augmented view of the first "
                                f"{config.cifar_samples} images, targets c_i = h(z2_i) of a second view (stop-gradient); "
                                f"the view gap over {10 * config.cifar_per_class} images")}
    absent = absent_message(groups)
    meas: dict[str, Any] = {}
    fractions = {}
    for a in acts:
        ms = cells[a]
        one = [entry(m, 1.0) for m in ms]
        flags = [_flag(e) for e in one]
        usable = [float(f) for f in flags if f is not None]
        meas[f"frac_seeds_past_threshold[{a}]"] = measured(
            usable or float("nan"), n=len(usable), what="seeds whose state is past its own threshold (lambda_min(H_eff) "
            "< -floor with G PSD) among those with G PSD", seeds_G_indefinite=len(flags) - len(usable))
        meas[f"threshold_ratio[{a}]"] = measured([e["ratio"] for e in one if e["ratio"] is not None] or float("nan"),
                                                 what="max over blocks of lambda_max(-G^-1/2 M G^-1/2): the state's "
                                                      "residual over its own threshold (> 1: past it; G PD only)")
        meas[f"lambda_min_H[{a}]"] = measured([e["lambda_min_H"] for e in one] or float("nan"))
        meas[f"lambda_min_G[{a}]"] = measured([e["lambda_min_G"] for e in one] or float("nan"))
        meas[f"view_gap_deg[{a}]"] = _gap_measured(ms)
        if a in smooth and usable:
            fractions[a] = sum(usable) / len(usable)
    meas[HEADLINE] = measured(min(fractions.values()) if fractions else float("nan"), n=len(fractions),
                              what="smallest fraction over the smooth activations")
    judged = {a: cells[a] for a in smooth}
    robustness, rule = _robustness(config, judged)
    verdict = rule()
    smooth_cells = [m for a in smooth for m in cells[a]]
    gap = _gap_measured(smooth_cells, definition="angle between the head outputs h(z1), h(z2) of two augmented "
                        "views of one image, at the pseudo-collapsed init",
                        state_gap=measured([m["state_gap_deg"] for m in smooth_cells] or float("nan"))["value"],
                        other_bn_mode=_gap_measured(smooth_cells, "view_gap_other_mode_deg")["value"],
                        backbone_gap=_gap_measured(smooth_cells, "view_gap_z_deg")["value"])
    lo, hi = min(config.gap_multipliers), max(config.gap_multipliers)
    g = gap["value"] if has_data(gap) else None
    per_head = ", ".join(f"{a} {meas[f'view_gap_deg[{a}]']['value']:.3g}" for a in smooth
                         if has_data(meas[f"view_gap_deg[{a}]"]))
    gap_text = (f"{g:.3g} ± {gap['spread']:.2g} degrees over images and smooth heads (per head: {per_head}; the "
                f"gap is the head's, so a head can carry far less of it than the others; BatchNorm in "
                f"{config.backbone_mode} mode; {gap['other_bn_mode']:.3g} degrees in the other mode)"
                if g is not None else "not measured")
    conventions = ("view_gap", "rel_floor", "majority", "state_samples")
    rule_text = (f"per seed, the state of the first {config.cifar_samples} images is past its own threshold when "
                 f"lambda_min(H_eff) < -floor with G PSD (floor = {config.rel_floor:g} * max(max|lambda|, S), S the "
                 "operand scale of G; equivalently the ratio lambda_max(-G^-1/2 M G^-1/2) > 1, reported); seeds whose "
                 f"G is indefinite are left out and counted; supported if every smooth activation ({', '.join(smooth)}) "
                 f"is past in >= {config.majority:.0%} of its usable seeds, not supported if one is past in none, "
                 "inconclusive otherwise or when a smooth activation has no usable seed. Linear and ReLU heads are "
                 "reported, not judged")
    if kind == DIAGNOSTIC:
        criterion = (f"diagnostic, not counted: {AMBIENT_G}; {_indefinite_text(cells, smooth)}. Rule, as under the "
                     f"other readings: {rule_text}. View gap {gap_text}")
        robustness, conventions = {}, ()
    else:
        criterion = (f"{rule_text}. Reading: " + ("the Riemannian Hessian of the cosine loss on the sphere"
                                                   if reading == "tangential" else
                                                   "the collapse theorem's MSE premise as a loss, 1/2|u - c|^2 (G = "
                                                   "J^T J/N PSD by construction)")
                     + f". Conventions, each re-read from the stored state (robustness): the view gap, measured "
                     f"{gap_text}, re-read at x {lo:g} to x {hi:g} of it (every target rotated in the plane of u and "
                     f"its own target: exact, two evaluations); the sign floor over {FLOORS[0]:g}-{FLOORS[-1]:g}; the "
                     f"majority over {MAJORITIES[0]:g}-{MAJORITIES[-1]:g}; the state's size over the first 1-"
                     f"{config.cifar_samples} images (H_eff of a batch is negative where one block is). Not swept: "
                     "the augmentation recipe and the backbone's width (one each)")
    reason = None
    if absent:
        verdict = Verdict("inconclusive", HEADLINE, absent)
        reason, robustness, conventions = f"{NOT_MEASURED}{absent}", {}, conventions
    return Row(id="C4", statement=("Thm 4.1 where training starts: the paper's pseudo-collapsed init on real images "
                                   "is past its own threshold for smooth heads (negative curvature that M injects "
                                   "into a PSD G)"),
               setting=setting, measured=meas, headline=HEADLINE, verdict=verdict.outcome, evidence=kind,
               criterion=criterion, reason=reason, conventions=conventions, robustness=robustness,
               view_gap=gap if g is not None else None,
               headline_text=("share of seeds whose smooth head, at the paper's pseudo-collapsed init on CIFAR-10 "
                              "views, sits past its own collapse threshold (worst smooth activation)"))


def synthetic_index(ms: list[dict], gap_deg: float) -> int:
    """The view noise whose gap (median over cells) is nearest ``gap_deg`` in log distance."""
    noises = ms[0]["view_noises"]
    med = [statistics.median(math.degrees(m["points"][i]["gap"]) for m in ms) for i in range(len(noises))]
    return min(range(len(noises)), key=lambda i: abs(math.log(max(med[i], 1e-300) / gap_deg)))


def synthetic_claim(config: C4Config, groups: Groups, reading: str, gap_deg: float | None) -> Row | None:
    acts = [a for a in config.activations if (SYNTHETIC, reading, a) in groups]
    smooth = [a for a in acts if a not in NON_SMOOTH]
    if not smooth:
        return None
    cells = {a: groups[(SYNTHETIC, reading, a)] for a in acts}
    noises = cells[acts[0]][0]["view_noises"]

    def rule(i: int) -> Verdict:
        flags = {a: [None if m["points"][i]["n_negative_G"] > 0 else m["points"][i]["n_negative_H"] > 0
                     for m in cells[a]] for a in smooth}
        return flags_verdict(flags, config.majority, HEADLINE)

    everything = [m for ms in cells.values() for m in ms]
    idx = synthetic_index(everything, gap_deg) if gap_deg else None
    meas: dict[str, Any] = {}
    for a in acts:
        for i, noise in enumerate(noises):
            pts = [m["points"][i] for m in cells[a]]
            usable = [float(p["n_negative_H"] > 0) for p in pts if p["n_negative_G"] == 0]
            meas[f"frac_seeds_past_threshold[{a}, view_noise={noise:g}]"] = measured(
                usable or float("nan"), n=len(usable), seeds_G_indefinite=len(pts) - len(usable),
                gap_deg=statistics.median(math.degrees(p["gap"]) for p in pts))
    fractions = []
    if idx is not None:
        for a in smooth:
            usable = [m["points"][idx]["n_negative_H"] > 0 for m in cells[a] if m["points"][idx]["n_negative_G"] == 0]
            if usable:
                fractions.append(sum(usable) / len(usable))
    meas[HEADLINE] = measured(min(fractions) if fractions else float("nan"), n=len(fractions),
                              what="smallest fraction over the smooth activations at the view noise whose gap is "
                                   "nearest the measured one")
    grad_rel = [p["grad_z_rel"] for m in everything for p in m["points"]]
    if idx is None:
        verdict, robustness, conventions = Verdict("inconclusive", HEADLINE), {}, ()
        at = "no measured gap to compare with (the measured init's rows say why)"
    else:
        verdict = rule(idx)
        robustness = {"view_noise": sweep(lambda v: rule(list(noises).index(v)), noises[idx], list(noises))}
        conventions = ("view_noise",)
        at = (f"judged at view_noise {noises[idx]:g}, whose gap is nearest the measured {gap_deg:.3g} degrees; the "
              "robustness entry re-reads it at every view noise of the sweep")
    setting = {**row_setting(config, SYNTHETIC, reading, acts),
               "construction": f"z ~ {config.z_scale:g} N(0, I_{config.d}) (not collapsed), targets h(z + view_noise "
                               "* eps) (the gap set by view_noise, swept over "
                               f"{', '.join(f'{v:g}' for v in noises)})"}
    return Row(id="C4", statement=("the synthetic pseudo-collapsed state (z ~ N(0, I), second views z + view_noise * "
                                   "eps) is past its own threshold for smooth heads"),
               setting=setting, measured=meas, headline=HEADLINE, verdict=verdict.outcome, evidence=DIAGNOSTIC,
               conventions=conventions, robustness=robustness,
               headline_text="share of seeds whose smooth head at the synthetic init is past its threshold",
               criterion=(f"diagnostic, not counted: the state is neither collapsed nor an equilibrium (relative "
                          f"|grad_z L| {min(grad_rel):.2g}-{max(grad_rel):.2g}) and its residual is set by the view "
                          f"noise, not measured, so the chosen noise fixes the outcome; {at}. Rule as the measured "
                          "init's: past when lambda_min(H_eff) < -floor with G PSD, supported if every smooth "
                          f"activation is past in >= {config.majority:.0%} of its usable seeds"))
