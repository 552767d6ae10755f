"""C4's rows, tables, notes and figures from its cells (apart from computing them).

Rows (evidence kinds: :mod:`headgeom.claims.evidence`):

- identities at the constructed equilibria (:mod:`.identities`): the lemma "M has a negative direction ⇒ H_eff = G + tM turns
  indefinite at a finite t*", with the sign change checked either side of the closed-form t* and the spectra of
  G, M and H_eff per head; the MSE premise's linear/ReLU branch (G = JᵀJ/N ⪰ 0, M ≡ 0, so H_eff ⪰ 0);
- tests at the measured init (:data:`MEASURED`; :mod:`.init_rows`), tangential and MSE readings: is the state past its own
  threshold? With the view gap measured (``Row.view_gap``) and the verdict re-read over its conventions;
- diagnostics: the measured init under the ambient reading (its G is indefinite by the reading) and the
  synthetic pseudo-collapsed state (its gap is set by a view noise), shown at the measured gap with the sweep.
"""
from __future__ import annotations

import math
import statistics
from pathlib import PurePath
from typing import Callable

from headgeom.claims.estimates import mean_std_text
from headgeom.experiments.registry import Summary
from headgeom.report.plots import c4_collapse as plots
from headgeom.report.table import Table
from headgeom.theory.collapse_threshold import MAGNITUDE_OF_READING, NONE_IN_RANGE

from .config import EQUILIBRIUM_STATES, MEASURED, NON_SMOOTH, SYNTHETIC, C4Config
from .identities import lemma_claim, non_smooth_claim
from .init_rows import absent_message, entry, measured_claim, measured_gap, synthetic_claim, synthetic_index
from .rows import Groups, group, has_threshold, pm

__all__ = ["summarize"]



def _source_text(source: str) -> str:
    """"jpeg cifar10-jpeg.tar.gz": the kind of a cell's data source and its file's name, not the folder of the
    machine that ran it (a results file is read on other machines)."""
    kind, _, path = source.partition(" ")
    return f"{kind} {PurePath(path).name}" if path else source

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
                table.add(a, r, *(pm(ms, k) for _, k in cols), len(ms))
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
                    (f"{s:g}", _ratio_text([entry(m, s)["ratio"] for m in real],
                                           [math.degrees(entry(m, s)["gap"]) for m in real]))
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
            f"images from {_source_text(m0['data_source'])}, views {m0['recipe']}, {m0['backbone']} at init, BatchNorm in "
            f"{m0['backbone_mode']} mode); the same views with BatchNorm in the other mode: "
            f"{mean_std_text(v for m in measured_cells for v in m['view_gap_other_mode_deg'])} degrees; at the "
            f"backbone (z1, z2): {mean_std_text(v for m in measured_cells for v in m['view_gap_z_deg'])} degrees. "
            f"The two-term gap sweep reproduces each state at x1 to {max(m['sweep_vs_point'] for m in measured_cells):.1e} "
            "(relative lambda_min).")
    elif (message := absent_message(groups)) is not None:
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
                    thr = [m["threshold"] for m in ms if has_threshold(m)]
                    parts.append(f"{a} {statistics.median(thr):.3g} ({len(thr)}/{len(ms)} seeds)" if thr
                                 else f"{a} {NONE_IN_RANGE}")
            if parts:
                notes.append(f"threshold in {MAGNITUDE_OF_READING[r]} ({st}, {r}; median over seeds, closed form): "
                             + "; ".join(parts) + ".")
    return notes


def summarize(config: C4Config, results: list[tuple[dict, dict]]) -> Summary:
    """Rows per state × reading (package docstring), a table per state, the sweep table, notes and figures."""
    groups = group(results)
    gap_deg = measured_gap(groups)
    cosine = tuple(r for r in ("ambient", "tangential") if r in config.readings)
    claims = []
    for st in (s for s in config.states if s in EQUILIBRIUM_STATES):
        for readings in (cosine, ("mse",) if "mse" in config.readings else ()):
            if readings and (row := lemma_claim(config, groups, st, readings)) is not None:
                claims.append(row)
    claims += [c for st in config.states if st in EQUILIBRIUM_STATES
               if (c := non_smooth_claim(config, groups, st)) is not None]
    claims += [c for r in config.readings if (c := measured_claim(config, groups, r)) is not None]
    claims += [c for r in config.readings if (c := synthetic_claim(config, groups, r, gap_deg)) is not None]
    synthetic = [m for (st, _, _), ms in groups.items() if st == SYNTHETIC for m in ms]
    idx = synthetic_index(synthetic, gap_deg) if synthetic and gap_deg else None
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
