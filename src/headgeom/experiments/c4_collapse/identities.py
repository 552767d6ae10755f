"""C4's identities at the constructed equilibria, where the theorem speaks: the lemma "M has a negative direction
⇒ H_eff = G + tM is PSD below a finite t* and indefinite beyond it" (the sign change checked on the family
itself, the spectra of G, M and H_eff per head) and the MSE premise's linear/ReLU branch (H_eff = JᵀJ/N ⪰ 0).
A failure is a bug; never counted as support (:mod:`headgeom.claims.evidence`)."""
from __future__ import annotations

from typing import Any

from headgeom.claims.collapse_instability import construction_verdict
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import IDENTITY
from headgeom.claims.row import Row
from headgeom.theory.collapse_threshold import A_SINGULAR, ENGINE_READING, MAGNITUDE_OF_READING
from headgeom.theory.collapse_threshold import OBJECTIVE_OF_READING as OBJECTIVE

from .config import NON_SMOOTH, C4Config
from .rows import Groups, has_threshold, row_setting, spectra, thresholds

__all__ = ["COINCIDE_TOL", "lemma_claim", "non_smooth_claim"]

COINCIDE_TOL = 1e-8  # |λ(ambient) − λ(tangential)| / max|λ| at a cosine equilibrium: equal up to round-off


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


def lemma_claim(config: C4Config, groups: Groups, state: str, readings: tuple[str, ...]) -> Row | None:
    """Per equilibrium state and loss: "M has a negative direction ⇒ a finite threshold, with the sign change
    there" (an identity, :mod:`headgeom.geometry.linalg.threshold`); for the cosine loss the ambient and tangential
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
            if m["n_negative_M"] > 0 and not has_threshold(m) and not str(m.get("threshold_status")).startswith(A_SINGULAR):
                broken.append(f"{a} seed with n_negative(M) = {m['n_negative_M']} and no threshold")
            if m.get("crossing_ok") is False:
                broken.append(f"{a} seed whose H_eff does not change sign across its threshold (negative below: "
                              f"{m['crossing_negative_below']}, above: {m['crossing_negative_above']})")
        meas[f"threshold[{a}]"] = thresholds(ms, magnitude)
        meas[f"frac_seeds_M_negative[{a}]"] = measured([float(m["n_negative_M"] > 0) for m in ms],
                                                     what="seeds where M has a direction below -floor")
        checked = [float(bool(m.get("crossing_ok"))) for m in ms if m.get("crossing_ok") is not None]
        meas[f"frac_seeds_sign_change[{a}]"] = measured(checked or float("nan"), n=len(checked),
                                                        what="seeds whose H_eff is PSD a factor (1 - margin) below "
                                                             "the threshold and indefinite (1 + margin) above it")
        spectra(meas, ms, a)
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
    setting = {**row_setting(config, state, label, acts), "construction": _construction(config, state, OBJECTIVE[first])}
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


def non_smooth_claim(config: C4Config, groups: Groups, state: str) -> Row | None:
    """The MSE loss's linear/ReLU branch at ``state``: H_eff = G = JᵀJ/N ⪰ 0 since M ≡ 0 (an identity);
    None when neither head ran under that reading."""
    acts = [a for a in NON_SMOOTH if (state, "mse", a) in groups]
    if not acts:
        return None
    cells_here = [m for a in acts for m in groups[(state, "mse", a)]]
    verdict = construction_verdict([f"n_negative(H_eff) = {m['n_negative_H']}" + (", a threshold in range"
                                                                              if has_threshold(m) else "")
                                    for m in cells_here if m["n_negative_H"] != 0 or has_threshold(m)],
                                   f"lambda_min_H[{acts[0]}]")
    meas: dict[str, Any] = {}
    for a in acts:
        ms = groups[(state, "mse", a)]
        if all(m.get("threshold_status") is not None for m in ms):
            meas[f"threshold[{a}]"] = thresholds(ms, "residual")
        spectra(meas, ms, a)
        meas[f"n_negative_H[{a}]"] = measured([m["n_negative_H"] for m in ms])
        meas[f"M_fro[{a}]"] = measured([m["M_fro"] for m in ms], what="‖M‖_F (0 for linear; ReLU off its kinks)")
    setting = {**row_setting(config, state, "mse", acts), "engine_reading": ENGINE_READING["mse"],
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
