"""What C4's rows share: the grouping of its cells, the setting a row names, per-head spectra, the headline."""
from __future__ import annotations

import statistics
from typing import Any

from headgeom.claims.estimates import mean_std_text, measured
from headgeom.theory.collapse_threshold import OBJECTIVE_OF_READING as OBJECTIVE

from .config import C4Config

__all__ = ["HEADLINE", "Groups", "group", "has_threshold", "pm", "row_setting", "spectra", "thresholds"]

Groups = dict[tuple[str, str, str], list[dict]]
"""(state, reading, activation) -> the metrics of its seeds."""
HEADLINE = "min_frac_past_threshold"


def group(results: list[tuple[dict, dict]]) -> Groups:
    groups: Groups = {}
    for cell, metrics in results:
        groups.setdefault((cell["state"], cell["reading"], cell["activation"]), []).append(metrics)
    return groups


def pm(ms: list[dict], key: str) -> str:
    return mean_std_text(m.get(key) for m in ms)


def has_threshold(m: dict) -> bool:
    return m.get("threshold") is not None


def thresholds(ms: list[dict], magnitude: str) -> dict[str, Any]:
    """Median and spread over seeds of the finite thresholds, with how many seeds had one."""
    vals = [float(m["threshold"]) for m in ms if has_threshold(m)]
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


def row_setting(config: C4Config, state: str, reading: str, acts: list[str],
             widths: tuple[int, int, int] | None = None, n: int | None = None) -> dict[str, Any]:
    return {"objective": OBJECTIVE[reading.split(" ")[0]], "head": _head(config, acts, widths), "reading": reading,
            "preset": config.preset, "state": state, "N": n or config.n_samples,
            "weight_scale": 1.0 if state == "equilibrium" else config.pseudo_scale,
            "reduction": "batch mean (per-sample blocks carry 1/N)"}


def spectra(meas: dict[str, Any], ms: list[dict], act: str) -> None:
    """Per head: λ_min of H_eff, G and M and λ_max of G (mean ± std over seeds)."""
    for key in ("lambda_min_H", "lambda_min_G", "lambda_max_G", "lambda_min_M"):
        meas[f"{key}[{act}]"] = measured([m[key] for m in ms])
