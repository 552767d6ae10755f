"""C4's rows, tables, notes and figures from its cells (apart from computing them).

Rows (evidence kinds: :mod:`headgeom.claims.evidence`):

- identities at the constructed equilibria: the lemma "M has a negative direction ⇒ H_eff = G + tM turns
  indefinite at a finite t*", with the sign change checked either side of the closed-form t* and the spectra of
  G, M and H_eff per head; the MSE premise's linear/ReLU branch (G = JᵀJ/N ⪰ 0, M ≡ 0, so H_eff ⪰ 0);
- tests at the measured init (:data:`MEASURED`), tangential and MSE readings: is the state past its own
  threshold? With the view gap measured (``Row.view_gap``) and the verdict re-read over its conventions;
- diagnostics: the measured init under the ambient reading (its G is indefinite by the reading) and the
  synthetic pseudo-collapsed state (its gap is set by a view noise), shown at the measured gap with the sweep.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable

from headgeom.claims.collapse_instability import AMBIENT_G, construction_verdict, flags_verdict, state_flag
from headgeom.claims.estimates import mean_std_text, measured
from headgeom.claims.evidence import DIAGNOSTIC, IDENTITY, TEST, has_data
from headgeom.claims.robustness import sweep
from headgeom.claims.row import Row
from headgeom.claims.verdict import Verdict
from headgeom.experiments.registry import Summary
from headgeom.report.plots import c4_collapse as plots
from headgeom.report.table import Table
from headgeom.theory.collapse_threshold import A_SINGULAR, ENGINE_READING, MAGNITUDE_OF_READING, NONE_IN_RANGE
from headgeom.theory.collapse_threshold import OBJECTIVE_OF_READING as OBJECTIVE

from .config import EQUILIBRIUM_STATES, MEASURED, NON_SMOOTH, SYNTHETIC, C4Config

__all__ = ["FLOORS", "MAJORITIES", "summarize"]

Groups = dict[tuple[str, str, str], list[dict]]
FLOORS = (1e-12, 1e-10, 1e-8, 1e-6)  # the sign floor's range every test row is re-read over
MAJORITIES = (0.5, 0.6, 0.8, 1.0)  # the majority's range
COINCIDE_TOL = 1e-8  # |λ(ambient) − λ(tangential)| / max|λ| at a cosine equilibrium: equal up to round-off
HEADLINE = "min_frac_past_threshold"



def _group(results: list[tuple[dict, dict]]) -> Groups:
    groups: Groups = {}
    for cell, metrics in results:
        groups.setdefault((cell["state"], cell["reading"], cell["activation"]), []).append(metrics)
    return groups


def _pm(ms: list[dict], key: str) -> str:
    return mean_std_text(m.get(key) for m in ms)


def _has_threshold(m: dict) -> bool:
    return m.get("threshold") is not None


def _thresholds(ms: list[dict], magnitude: str) -> dict[str, Any]:
    """Median and spread over seeds of the finite thresholds, with how many seeds had one."""
    vals = [float(m["threshold"]) for m in ms if _has_threshold(m)]
    statuses = sorted({str(m.get("threshold_status")) for m in ms})
    what = f"{magnitude} at which lambda_min(H_eff) reaches 0 (closed form)"
    if not vals:
        return {"value": None, "n": len(ms), "spread": None, "n_with_threshold": 0, "what": what,
                "status": ", ".join(statuses)}
    out = measured(vals, what=what, n_with_threshold=len(vals), n_seeds=len(ms), status=", ".join(statuses))
    return out.replace(mean=out["value"], value=statistics.median(vals),
                       spread_kind="median over the seeds with a threshold; spread = std (ddof=1)")


def _head(config: C4Config, acts: list[str], widths: tuple[int, int, int] | None = None) -> str:
    d, hidden, k = widths or (config.d, config.hidden, config.k)
    return f"{d}-{hidden}-{k}" + ("" if config.bias else ":nobias") + f" x {{{', '.join(acts)}}}"


def _construction(config: C4Config, state: str, loss: str) -> str:
    scale = 1.0 if state == "equilibrium" else config.pseudo_scale
    common = (f"every one of the N = {config.n_samples} samples at one z_bar ~ {config.z_scale:g} N(0, I_{config.d}) "
              f"(collapsed), head weights at default init x {scale:g}; the residuals rho_i = grad_u L are drawn "
              "uniformly from a null space that makes grad_z L = J^T rho = 0 exactly (an equilibrium with rho != 0): ")
    if loss == "mse":
        return common + (f"u - c_i of norm {config.mse_residual:g} in the left null space of J_h(z_bar) (dimension "
                         f">= k - d = {config.k - config.d}), rho_i = (u - c_i)/N")
    return common + (f"c_i = cos(theta) u^ + sin(theta) r_i, theta = {config.cosine_angle:.4g} rad, r_i unit in the "
                     "left null space of [J_h(z_bar), u], rho_i = -sin(theta)/(N |u|) r_i")


def _setting(config: C4Config, state: str, reading: str, acts: list[str],
             widths: tuple[int, int, int] | None = None, n: int | None = None) -> dict[str, Any]:
    return {"objective": OBJECTIVE[reading.split(" ")[0]], "head": _head(config, acts, widths), "reading": reading,
            "preset": config.preset, "state": state, "N": n or config.n_samples,
            "weight_scale": 1.0 if state == "equilibrium" else config.pseudo_scale,
            "reduction": "batch mean (per-sample blocks carry 1/N)"}


def _spectra(meas: dict[str, Any], ms: list[dict], act: str) -> None:
    """Per head: λ_min of H_eff, G and M and λ_max of G (mean ± std over seeds)."""
    for key in ("lambda_min_H", "lambda_min_G", "lambda_max_G", "lambda_min_M"):
        meas[f"{key}[{act}]"] = measured([m[key] for m in ms])


# ------------------------------------------------------------------ identities at the constructed equilibria
def _lemma_claim(config: C4Config, groups: Groups, state: str, readings: tuple[str, ...]) -> Row | None:
    """Per equilibrium state and loss: "M has a negative direction ⇒ a finite threshold, with the sign change
    there" (an identity, :mod:`headgeom.geometry.threshold`); for the cosine loss the ambient and tangential
    readings are one row, since they coincide at an equilibrium, and their coincidence is checked in the row."""
    acts = [a for a in config.activations if a not in NON_SMOOTH and any((state, r, a) in groups for r in readings)]
    if not acts:
        return None
    first = readings[0]
    magnitude = MAGNITUDE_OF_READING[first]
    meas: dict[str, Any] = {}
    broken = []
    for a in acts:
        ms = groups.get((state, first, a), [])
        for m in ms:
            if m["n_negative_M"] > 0 and not _has_threshold(m) and not str(m.get("threshold_status")).startswith(A_SINGULAR):
                broken.append(f"{a} seed with n_negative(M) = {m['n_negative_M']} and no threshold")
            if m.get("crossing_ok") is False:
                broken.append(f"{a} seed whose H_eff does not change sign across its threshold (negative below: "
                              f"{m['crossing_negative_below']}, above: {m['crossing_negative_above']})")
        meas[f"threshold[{a}]"] = _thresholds(ms, magnitude)
        meas[f"frac_seeds_M_negative[{a}]"] = measured([float(m["n_negative_M"] > 0) for m in ms],
                                                     what="seeds where M has a direction below -floor")
        checked = [float(bool(m.get("crossing_ok"))) for m in ms if m.get("crossing_ok") is not None]
        meas[f"frac_seeds_sign_change[{a}]"] = measured(checked or float("nan"), n=len(checked),
                                                        what="seeds whose H_eff is PSD a factor (1 - margin) below "
                                                             "the threshold and indefinite (1 + margin) above it")
        _spectra(meas, ms, a)
    gaps = []
    if len(readings) > 1:
        for a in config.activations:
            for x, y in zip(groups.get((state, readings[0], a), []), groups.get((state, readings[1], a), [])):
                scale = max(abs(x["lambda_min_H"]), abs(x["lambda_max_H"]), 1e-300)
                gaps.append(abs(x["lambda_min_H"] - y["lambda_min_H"]) / scale)
                if x.get("threshold") is not None and y.get("threshold") is not None:
                    gaps.append(abs(x["threshold"] - y["threshold"]) / max(abs(x["threshold"]), 1e-300))
        meas["readings_gap"] = measured(max(gaps) if gaps else float("nan"), n=len(gaps),
                                        what="max relative gap of lambda_min(H_eff) and of the threshold between "
                                             "the ambient and tangential readings")
        if gaps and max(gaps) > COINCIDE_TOL:
            broken.append(f"ambient and tangential differ by {max(gaps):.3g} (relative)")
    label = " = ".join(readings) + (" (they coincide at a cosine equilibrium)" if len(readings) > 1 else "")
    coincide = ("; and the ambient and tangential readings give the same lambda_min(H_eff) and threshold to "
                f"{COINCIDE_TOL:g} (relative): Euler's identity for the 0-homogeneous -cos gives P H P - H = "
                "(u^ rho^T + rho u^T)/|u|, which J^T rho = 0 annihilates in J^T(.)J") if len(readings) > 1 else ""
    verdict = construction_verdict(broken, f"threshold[{acts[0]}]")
    setting = {**_setting(config, state, label, acts), "construction": _construction(config, state, OBJECTIVE[first])}
    margin = next((m["crossing_margin"] for a in acts for m in groups.get((state, first, a), [])
                   if m.get("crossing_margin") is not None), None)
    return Row(
        id="C4", statement=("Thm 4.1 at constructed collapsed equilibria with rho != 0: where M has a negative "
                            "direction, H_eff = G + tM is PSD below a finite t* and indefinite beyond it"),
        setting=setting, measured=meas, headline=verdict.headline, verdict=verdict.outcome, evidence=IDENTITY,
        headline_text=f"the residual ({magnitude}) past which a smooth head's collapsed equilibrium turns into a saddle",
        criterion=("holds by construction: if v^T M v < 0 then v^T (G + tM) v < 0 for t > v^T G v / (-v^T M v), "
                   "and with rho drawn sign-symmetrically M has such a direction almost surely, so a finite "
                   "threshold exists; never counted as support. Threshold in closed form (t* = 1/lambda_max"
                   "(-G^-1/2 M G^-1/2) per block, the minimum over blocks; the angle arctan t* under the cosine "
                   "loss); the sign change is checked on the family itself"
                   + (f" a factor 1 -/+ {margin:g} either side of it" if margin is not None else "")
                   + f"; a bisection sweep over a {config.sweep_points}-point log grid is the tests' cross-check"
                   + coincide + ". Spectra of H_eff, G and M per head beside. A failure is a bug"
                   + (f": {'; '.join(broken)}" if broken else "")),
    )


def _non_smooth_claim(config: C4Config, groups: Groups, state: str) -> Row | None:
    """The MSE loss's linear/ReLU branch at ``state``: H_eff = G = JᵀJ/N ⪰ 0 since M ≡ 0 (an identity);
    None when neither head ran under that reading."""
    acts = [a for a in NON_SMOOTH if (state, "mse", a) in groups]
    if not acts:
        return None
    cells_here = [m for a in acts for m in groups[(state, "mse", a)]]
    verdict = construction_verdict([f"n_negative(H_eff) = {m['n_negative_H']}" + (", a threshold in range"
                                                                              if _has_threshold(m) else "")
                                    for m in cells_here if m["n_negative_H"] != 0 or _has_threshold(m)],
                                   f"lambda_min_H[{acts[0]}]")
    meas: dict[str, Any] = {}
    for a in acts:
        ms = groups[(state, "mse", a)]
        if all(m.get("threshold_status") is not None for m in ms):
            meas[f"threshold[{a}]"] = _thresholds(ms, "residual")
        _spectra(meas, ms, a)
        meas[f"n_negative_H[{a}]"] = measured([m["n_negative_H"] for m in ms])
        meas[f"M_fro[{a}]"] = measured([m["M_fro"] for m in ms], what="‖M‖_F (0 for linear; ReLU off its kinks)")
    setting = {**_setting(config, state, "mse", acts), "engine_reading": ENGINE_READING["mse"],
               "construction": _construction(config, state, "mse")}
    return Row(
        id="C4", statement=("Thm 4.1, linear branch under the MSE premise: with ∇²_u L = I/N, G = JᵀJ/N ⪰ 0 "
                            "and M ≡ 0 (linear; ReLU away from its kinks), so H_eff ⪰ 0"),
        setting=setting, measured=meas, verdict=verdict.outcome, evidence=IDENTITY, headline=verdict.headline,
        headline_text="the smallest eigenvalue of H_eff for a linear head at a collapsed equilibrium (never negative)",
        criterion=(f"holds by construction; supported if n_negative(H_eff) = 0 (lambda < -floor, floor = "
                   f"{config.rel_floor:g} * max|lambda|) in every seed of {', '.join(acts)}, at residual "
                   f"{config.mse_residual:g} and everywhere on the sweep of [{config.residual_range[0]:g}, "
                   f"{config.residual_range[1]:g}] (no threshold in range); not supported (a bug) otherwise. "
                   "Spectra of H_eff, G and M per head beside"),
    )


# ------------------------------------------------------------------ the measured init
def _measured_cells(groups: Groups, reading: str, acts: list[str]) -> dict[str, list[dict]]:
    return {a: [m for m in groups.get((MEASURED, reading, a), []) if m.get("status") == "measured"] for a in acts}


def _absent_message(groups: Groups) -> str | None:
    for (state, _, _), ms in groups.items():
        for m in ms:
            if state == MEASURED and m.get("status") == "absent":
                return m.get("message")
    return None


def _entry(m: dict, multiplier: float) -> dict:
    return next(s for s in m["gap_sweep"] if s["multiplier"] == multiplier)


def _flag(entry: dict) -> bool | None:
    return None if entry["n_negative_G"] > 0 else bool(entry["n_negative_H"] > 0)


def _gap_measured(cells: list[dict], key: str = "view_gap_deg", **extra: Any) -> Any:
    """The angles of every image of ``cells`` pooled: mean ± std over images, in degrees."""
    angles = [v for m in cells for v in m[key]]
    return measured(angles or float("nan"), unit="degrees", spread_kind="std over images (ddof=1)",
                    seeds=len(cells), **extra)


def measured_gap(groups: Groups) -> float | None:
    """The mean view gap (degrees) over every measured cell of a smooth head (the heads the rows judge; each row
    also reports its own), None without one."""
    angles = [v for (state, _, act), ms in groups.items() if state == MEASURED and act not in NON_SMOOTH for m in ms
              if m.get("status") == "measured" for v in m["view_gap_deg"]]
    return sum(angles) / len(angles) if angles else None


def _robustness(config: C4Config, cells: dict[str, list[dict]]) -> dict[str, Any]:
    """The measured-init rule re-read over each convention (the cells stored what it needs)."""
    def rule(multiplier: float = 1.0, rel_floor: float | None = None, majority: float = config.majority,
             n: int | None = None) -> Verdict:
        flags = {}
        for a, ms in cells.items():
            if rel_floor is None and n is None:
                flags[a] = [_flag(_entry(m, multiplier)) for m in ms]
            else:
                one = [_entry(m, 1.0) for m in ms]
                flags[a] = [state_flag(e["per_block"], e["operand_scale"], config.rel_floor if rel_floor is None
                                       else rel_floor, n) for e in one]
        return flags_verdict(flags, majority, HEADLINE)

    n = min((len(_entry(m, 1.0)["per_block"]["H_lambda_min"]) for ms in cells.values() for m in ms),
            default=config.cifar_samples)  # the blocks each state stored
    sizes = sorted({1, 2, 4, n // 2 or 1, n} & set(range(1, n + 1)))
    return {"view_gap": sweep(lambda s: rule(multiplier=s), 1.0, config.gap_multipliers),
            "rel_floor": sweep(lambda f: rule(rel_floor=f), config.rel_floor, sorted({*FLOORS, config.rel_floor})),
            "majority": sweep(lambda q: rule(majority=q), config.majority, sorted({*MAJORITIES, config.majority})),
            "state_samples": sweep(lambda k: rule(n=k), n, sizes)}, rule


def _indefinite_text(cells: dict[str, list[dict]], smooth: list[str]) -> str:
    """'measured: G indefinite in a of b seeds of the linear/ReLU heads, c of d of the smooth heads'."""
    def count(acts: list[str]) -> tuple[int, int]:
        flags = [_entry(m, 1.0)["n_negative_G"] > 0 for a in acts for m in cells[a]]
        return sum(flags), len(flags)

    parts = [f"{i} of {n} seeds of the {what} heads" for what, acts in
             (("linear/ReLU", [a for a in cells if a not in smooth]), ("smooth", smooth)) if acts
             for i, n in [count(acts)]]
    return "measured: G indefinite in " + ", ".join(parts) + " (a seed with G indefinite cannot attribute negative " \
           "curvature to M and is left out)"


def _measured_claim(config: C4Config, groups: Groups, reading: str) -> Row | None:
    """The init on CIFAR-10 under ``reading``: a test (tangential, MSE) or, under the ambient reading, a diagnostic."""
    acts = [a for a in config.activations if (MEASURED, reading, a) in groups]
    smooth = [a for a in acts if a not in NON_SMOOTH]
    if not smooth:
        return None
    cells = _measured_cells(groups, reading, acts)
    kind = DIAGNOSTIC if reading == "ambient" else TEST
    d = next((m["point"]["d"] for ms in cells.values() for m in ms), round(512 * config.backbone_width))
    widths = (d, config.cifar_hidden, config.cifar_k)
    setting = {**_setting(config, MEASURED, reading, acts, widths, config.cifar_samples),
               "data": "CIFAR-10 test images", "backbone": f"CIFAR ResNet-18 width {config.backbone_width:g} at init "
               f"(BatchNorm in {config.backbone_mode} mode)", "views": f"{config.recipe} (the paper's SimSiam recipe)",
               "construction": (f"z = the backbone's representations of a first augmented view of the first "
                                f"{config.cifar_samples} images, targets c_i = h(z2_i) of a second view (stop-gradient); "
                                f"the view gap over {10 * config.cifar_per_class} images")}
    absent = _absent_message(groups)
    meas: dict[str, Any] = {}
    fractions = {}
    for a in acts:
        ms = cells[a]
        one = [_entry(m, 1.0) for m in ms]
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
    gap_text = (f"{g:.3g} ± {gap['spread']:.2g} degrees over images (BatchNorm in {config.backbone_mode} mode; "
                f"{gap['other_bn_mode']:.3g} degrees in the other mode)" if g is not None else "not measured")
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
        reason, robustness, conventions = f"not measured: {absent}", {}, conventions
    return Row(id="C4", statement=("Thm 4.1 where training starts: the paper's pseudo-collapsed init on real images "
                                   "is past its own threshold for smooth heads (negative curvature that M injects "
                                   "into a PSD G)"),
               setting=setting, measured=meas, headline=HEADLINE, verdict=verdict.outcome, evidence=kind,
               criterion=criterion, reason=reason, conventions=conventions, robustness=robustness,
               view_gap=gap if g is not None else None,
               headline_text=("share of seeds whose smooth head, at the paper's pseudo-collapsed init on CIFAR-10 "
                              "views, sits past its own collapse threshold (worst smooth activation)"))


# ------------------------------------------------------------------ the synthetic init, swept over its view noise
def _synthetic_index(ms: list[dict], gap_deg: float) -> int:
    """The view noise whose gap (median over cells) is nearest ``gap_deg`` in log distance."""
    noises = ms[0]["view_noises"]
    med = [statistics.median(math.degrees(m["points"][i]["gap"]) for m in ms) for i in range(len(noises))]
    return min(range(len(noises)), key=lambda i: abs(math.log(max(med[i], 1e-300) / gap_deg)))


def _synthetic_claim(config: C4Config, groups: Groups, reading: str, gap_deg: float | None) -> Row | None:
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
    idx = _synthetic_index(everything, gap_deg) if gap_deg else None
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
    setting = {**_setting(config, SYNTHETIC, reading, acts),
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


# ------------------------------------------------------------------ tables, notes, figures
def _table(config: C4Config, groups: Groups, state: str, point: Callable[[dict], dict]) -> Table:
    cols = [("n_neg(H)", "n_negative_H"), ("λ_min(H)", "lambda_min_H"), ("λ_min(G)", "lambda_min_G"),
            ("λ_min(M)", "lambda_min_M"), ("‖M‖_F/‖H‖_F", "M_ratio_fro"), ("‖∇_z L‖", "grad_z_norm"),
            ("‖∇_z L‖ rel", "grad_z_rel")]
    table = Table(["activation", "reading", *(c for c, _ in cols), "n"],
                  title=f"C4 {state}: spectra of H_eff = G + M (mean ± std over seeds; blocks carry 1/N)")
    for a in config.activations:
        for r in config.readings:
            ms = [point(m) for m in groups.get((state, r, a), []) if m.get("status") != "absent"]
            if ms:
                table.add(a, r, *(_pm(ms, k) for _, k in cols), len(ms))
    return table


def _ratio_text(values: list[float | None], gaps: list[float]) -> str:
    rs = [v for v in values if v is not None]
    return (f"{statistics.median(rs):.3g}" if rs else "-") + f" ({statistics.median(gaps):.3g}°)"


def _sweep_table(config: C4Config, groups: Groups) -> Table | None:
    """Threshold ratio (median over seeds) against the gap: the measured init's multipliers, the synthetic noises."""
    rows = []
    for r in ("tangential", "mse"):
        for a in config.activations:
            if a in NON_SMOOTH:
                continue
            real = [m for m in groups.get((MEASURED, r, a), []) if m.get("status") == "measured"]
            if real:
                rows.append((a, r, "measured init, gap ×", [
                    (f"{s:g}", _ratio_text([_entry(m, s)["ratio"] for m in real],
                                           [math.degrees(_entry(m, s)["gap"]) for m in real]))
                    for s in config.gap_multipliers]))
            synth = groups.get((SYNTHETIC, r, a), [])
            if synth:
                rows.append((a, r, "synthetic init, view_noise", [
                    (f"{v:g}", _ratio_text([m["points"][i]["threshold_ratio"] for m in synth],
                                           [math.degrees(m["points"][i]["gap"]) for m in synth]))
                    for i, v in enumerate(synth[0]["view_noises"])]))
    if not rows:
        return None
    width = max(len(cells) for *_, cells in rows)
    table = Table(["activation", "reading", "state, swept", *(f"point {i + 1}" for i in range(width))],
                  title="C4: the state's threshold ratio (median over seeds; > 1: past its threshold) against the gap "
                        "between its views (median, degrees); '-' where G is not positive definite")
    for a, r, what, cells in rows:
        table.add(a, r, what, *(f"{x}: {t}" for x, t in cells), *([""] * (width - len(cells))))
    return table


def _median_curve(points: list[list[tuple[float, float | None]]], at: int | None = None
                  ) -> tuple[list[float], list[float], int | None]:
    """Per sweep position, the median gap (degrees) and the median ratio over the seeds whose ratio is defined
    (NaN where none is), and ``at``, the position of the state as measured (None for the synthetic sweep);
    ``points[seed][position]`` = (gap in radians, ratio or None)."""
    gaps, ratios = [], []
    for column in zip(*points):
        gaps.append(statistics.median(math.degrees(g) for g, _ in column))
        defined = [r for _, r in column if r is not None]
        ratios.append(statistics.median(defined) if defined else math.nan)
    return gaps, ratios, at


def _gap_curves(config: C4Config, groups: Groups) -> plots.Curves:
    """{reading: {smooth activation: {"measured" | "synthetic": (gaps in degrees, threshold ratios, position of
    the measured state)}}} for the gap figure, medians over seeds; readings whose G is PSD only (tangential, MSE)."""
    out: plots.Curves = {}
    for r in ("tangential", "mse"):
        for a in (a for a in config.activations if a not in NON_SMOOTH):
            real = [m for m in groups.get((MEASURED, r, a), []) if m.get("status") == "measured"]
            synth = groups.get((SYNTHETIC, r, a), [])
            curves = {}
            if real:
                curves["measured"] = _median_curve([[(e["gap"], e["ratio"]) for e in m["gap_sweep"]] for m in real],
                                                   list(config.gap_multipliers).index(1.0))
            if synth:
                curves["synthetic"] = _median_curve([[(p["gap"], p["threshold_ratio"]) for p in m["points"]]
                                                     for m in synth])
            if curves:
                out.setdefault(r, {})[a] = curves
    return out


def _notes(config: C4Config, groups: Groups, gap_deg: float | None) -> list[str]:
    notes = [f"floor = {config.rel_floor:g} * max|lambda| of the whole block-diagonal H_eff (at the measured init: "
             "max(max|lambda|, S), S the operand scale of G); λ < -floor counts as negative.",
             "ambient/tangential readings use the SimSiam negative cosine loss; mse is the MSE loss mean_i "
             "1/2|u_i - c_i|^2 read ambient (its own Hessian I/N and its own rho = (u - c)/N)."]
    measured_cells = [m for (st, _, _), ms in groups.items() if st == MEASURED for m in ms if m.get("status") == "measured"]
    if measured_cells:
        m0 = measured_cells[0]
        notes.append(
            f"measured view gap at the pseudo-collapsed init: {gap_deg:.3g} degrees (mean over "
            f"{sum(len(m['view_gap_deg']) for m in measured_cells)} image-head pairs; {m0['n_images']} CIFAR-10 test "
            f"images from {m0['data_source']}, views {m0['recipe']}, {m0['backbone']} at init, BatchNorm in "
            f"{m0['backbone_mode']} mode); the same views with BatchNorm in the other mode: "
            f"{mean_std_text(v for m in measured_cells for v in m['view_gap_other_mode_deg'])} degrees; at the "
            f"backbone (z1, z2): {mean_std_text(v for m in measured_cells for v in m['view_gap_z_deg'])} degrees. "
            f"The two-term gap sweep reproduces each state at x1 to {max(m['sweep_vs_point'] for m in measured_cells):.1e} "
            "(relative lambda_min).")
    elif (message := _absent_message(groups)) is not None:
        notes.append(f"measured init not run: {message}.")
    for st in (*EQUILIBRIUM_STATES,):
        for r in ("ambient", "tangential"):
            lin = groups.get((st, r, "linear"))
            if lin:
                neg = sum(m["n_negative_H"] > 0 for m in lin)
                notes.append(f"finding: linear head, {r} cosine reading, state {st}: H_eff has a negative eigenvalue "
                             f"in {neg}/{len(lin)} seeds (min λ_min {min(m['lambda_min_H'] for m in lin):.3g}).")
        for a in NON_SMOOTH:
            ms = [m for r in config.readings for m in groups.get((st, r, a), [])]
            if ms:
                notes.append(f"{a} head, state {st}: max ‖M‖_F = {max(m['M_fro'] for m in ms):.3g} "
                             f"(min distance of a pre-activation to a kink {min(m['kink_distance'] for m in ms):.3g}).")
    for st in config.sweep_states:
        for r in config.readings:
            parts = []
            for a in config.activations:
                ms = [m for m in groups.get((st, r, a), []) if m.get("threshold_status") is not None]
                if ms:
                    thr = [m["threshold"] for m in ms if _has_threshold(m)]
                    parts.append(f"{a} {statistics.median(thr):.3g} ({len(thr)}/{len(ms)} seeds)" if thr
                                 else f"{a} {NONE_IN_RANGE}")
            if parts:
                notes.append(f"threshold in {MAGNITUDE_OF_READING[r]} ({st}, {r}; median over seeds, closed form): "
                             + "; ".join(parts) + ".")
    return notes


def summarize(config: C4Config, results: list[tuple[dict, dict]]) -> Summary:
    """Rows per state × reading (package docstring), a table per state, the sweep table, notes and figures."""
    groups = _group(results)
    gap_deg = measured_gap(groups)
    cosine = tuple(r for r in ("ambient", "tangential") if r in config.readings)
    claims = []
    for st in (s for s in config.states if s in EQUILIBRIUM_STATES):
        for readings in (cosine, ("mse",) if "mse" in config.readings else ()):
            if readings and (row := _lemma_claim(config, groups, st, readings)) is not None:
                claims.append(row)
    claims += [c for st in config.states if st in EQUILIBRIUM_STATES
               if (c := _non_smooth_claim(config, groups, st)) is not None]
    claims += [c for r in config.readings if (c := _measured_claim(config, groups, r)) is not None]
    claims += [c for r in config.readings if (c := _synthetic_claim(config, groups, r, gap_deg)) is not None]
    synthetic = [m for (st, _, _), ms in groups.items() if st == SYNTHETIC for m in ms]
    idx = _synthetic_index(synthetic, gap_deg) if synthetic and gap_deg else None
    if synthetic and idx is None:  # no measured gap: the table shows the noise nearest the former 0.1
        idx = min(range(len(synthetic[0]["view_noises"])), key=lambda i: abs(synthetic[0]["view_noises"][i] - 0.1))
    pick = {EQUILIBRIUM_STATES[0]: lambda m: m, EQUILIBRIUM_STATES[1]: lambda m: m,
            SYNTHETIC: lambda m: m["points"][idx], MEASURED: lambda m: m["point"]}
    tables = [_table(config, groups, st, pick[st]) for st in config.states
              if any(k[0] == st and any(m.get("status") != "absent" for m in ms) for k, ms in groups.items())]
    if (table := _sweep_table(config, groups)) is not None:
        tables.append(table)
    notes = _notes(config, groups, gap_deg)
    if synthetic:
        notes.append(f"the synthetic pseudo-collapsed state is shown at view_noise {synthetic[0]['view_noises'][idx]:g} "
                     "in its table (the noise whose gap is nearest the measured one); it is not an equilibrium: "
                     f"‖∇_z L‖ rel ranges {min(p['grad_z_rel'] for m in synthetic for p in m['points']):.3g} .. "
                     f"{max(p['grad_z_rel'] for m in synthetic for p in m['points']):.3g}.")
    heads = f"{config.d}-{config.hidden}-{config.k}"
    flat = {k: [pick[k[0]](m) for m in ms if m.get("status") != "absent"] for k, ms in groups.items()}
    flat = {k: v for k, v in flat.items() if v}
    figures = [("lambda_min", lambda: plots.lambda_min(flat, config.states, config.readings, config.activations,
                                                       config.rel_floor, heads))]
    if any(m.get("sweep_grid") for ms in flat.values() for m in ms):
        figures.append(("lambda_min_sweep", lambda: plots.lambda_min_sweep(
            flat, config.sweep_states, config.readings, config.activations, config.rel_floor, MAGNITUDE_OF_READING,
            set(), heads)))
    curves = _gap_curves(config, groups)
    if curves:
        widths = next((f"{m['point']['d']}-{config.cifar_hidden}-{config.cifar_k}" for (st, _, _), ms in groups.items()
                       if st == MEASURED for m in ms if m.get("status") == "measured"), "-")
        figures.append(("gap_sweep", lambda: plots.gap_sweep(curves, gap_deg, f"synthetic {heads}, measured {widths}")))
    return Summary(claims=claims, tables=tables, figures=figures, notes=notes)
