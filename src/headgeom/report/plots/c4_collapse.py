"""C4's figures (docs/paper.md §4, Thm 4.1): λ_min of H_eff at the constructed collapsed states,
where H_eff turns indefinite along the threshold sweeps, and the threshold ratio against the gap between
two views (the measured init's gap sweep and the synthetic init's view-noise sweep, the measured gap
marked), from :mod:`headgeom.experiments.c4_collapse`'s cells.

``groups[(state, reading, activation)]``: the metrics of the seeds of that cell. A value with
|λ| ≤ floor (``rel_floor`` · max|λ|) is zero for the engine and drawn at 0."""
from __future__ import annotations

import statistics
from typing import Any, Sequence

from headgeom.claims.estimates import measured
from headgeom.report.style import (new_figure, series_style, shared_legend, shared_ylabel, signed_log_axis,
                                   zero_within_floor)

Groups = dict[tuple[str, str, str], list[dict]]


def lambda_min(groups: Groups, states: Sequence[str], readings: Sequence[str], activations: Sequence[str],
               rel_floor: float, heads: str) -> Any:
    """λ_min(H_eff)/max|λ| (mean ± std over seeds) per activation, a marker per reading, a panel
    per state with cells (in ``states`` order); ``heads`` names the head shape (d-hidden-k)."""
    states = [s for s in states if any(k[0] == s for k in groups)]
    fig, axes = new_figure(1, len(states), figsize=(4.2 * len(states), 3.4), squeeze=False, sharey=True)
    width = 0.8 / max(1, len(readings))
    for ax, st in zip(axes[0], states):
        for j, r in enumerate(readings):
            xs, ys, es = [], [], []
            for i, a in enumerate(activations):
                ms = groups.get((st, r, a))
                if ms:
                    rel = [m["lambda_min_rel_H"] for m in ms]
                    s = measured(zero_within_floor(rel, [rel_floor] * len(rel)))
                    xs.append(i + (j - (len(readings) - 1) / 2) * width)
                    ys.append(s["value"])
                    es.append(s["spread"])
            style = series_style(j)
            ax.errorbar(xs, ys, yerr=es, linestyle="none", marker=style["marker"], color=style["color"], capsize=3,
                        label=r)
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(activations)), activations, rotation=30)
        ax.set_title(st)
    axes[0][0].set_ylabel("λ_min(H_eff) / max|λ|  (mean ± std over seeds;\n"
                          f"|value| ≤ {rel_floor:g} drawn as 0)", fontsize=8)
    shared_legend(list(axes[0]), title="reading")
    fig.suptitle(f"C4: λ_min of H_eff at collapsed states, heads {heads}")
    return fig


def lambda_min_sweep(groups: Groups, states: Sequence[str], readings: Sequence[str], activations: Sequence[str],
                     rel_floor: float, magnitude_of: dict[str, str], init_comparable: set[str], heads: str) -> Any:
    """λ_min(H_eff)/max|λ| against the residual (MSE) or angle (cosine readings), median over seeds, per
    activation; the round-off band |λ| ≤ floor shaded; the pseudo-collapsed init's magnitude dotted.

    ``states``: the swept states; ``magnitude_of[reading]``: ``"residual"`` or the angle's name;
    ``init_comparable``: the states whose head has the pseudo-collapsed init's weight scale (only
    there is the init's magnitude drawn beside the sweep)."""
    states = [st for st in states if any(k[0] == st for k in groups)]
    readings = [r for r in readings if any(k[:2] == (st, r) for st in states for k in groups)]
    fig, axes = new_figure(len(states), len(readings), figsize=(4.0 * len(readings) + 1.6, 3.3 * len(states)),
                           squeeze=False)
    for row, st in zip(axes, states):
        for ax, r in zip(row, readings):
            for i, a in enumerate(activations):
                ms = [m for m in groups.get((st, r, a), []) if m.get("sweep_grid")]
                if not ms:
                    continue
                rel = [[lam / (fl / rel_floor) if fl > 0 else 0.0 for lam, fl in
                        zip(m["sweep_lambda_min"], m["sweep_floor"])] for m in ms]
                med = [statistics.median(col) for col in zip(*rel)]
                ax.plot(ms[0]["sweep_grid"], med, ms=4, label=a, **series_style(i))
                init = [m["point_magnitude"] for m in groups.get(("pseudo-collapsed", r, a), [])]
                if init and st in init_comparable:
                    ax.axvline(statistics.median(init), color=ax.lines[-1].get_color(), lw=0.8, ls=":")
            ax.axhspan(-rel_floor, rel_floor, color="0.85", label="round-off band (|λ| ≤ floor)")
            ax.axhline(0.0, color="0.4", lw=0.6)
            ax.set_xscale("log")
            signed_log_axis(ax, [v for line in ax.get_lines() for v in line.get_ydata()], floor=rel_floor)
            ax.set_xlabel("‖u − c_i‖ (residual)" if magnitude_of[r] == "residual" else "∠(u, c_i) [rad]")
            ax.set_title(f"{st}, {r}", fontsize=9)
    shared_ylabel(fig, "λ_min(H_eff) / max|λ| (median over seeds)")
    shared_legend([axes[0][-1]], title="activation (dotted: pseudo-collapsed init)")
    fig.suptitle(f"C4: where H_eff turns indefinite, heads {heads}")
    return fig


DEGREE_TICKS = (0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 90)


def _degree_ticks(ax: Any) -> None:
    """Major ticks on the log degree axis at DEGREE_TICKS within its range, as plain numbers, no minor labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # heavy: imported on first figure

    lo, hi = ax.get_xlim()
    ax.xaxis.set_major_locator(FixedLocator([t for t in DEGREE_TICKS if lo <= t <= hi] or [lo, hi]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


Curves = dict[str, dict[str, dict[str, tuple[Sequence[float], Sequence[float], int | None]]]]


def gap_sweep(curves: Curves, measured_gap: float | None, heads: str) -> Any:
    """The state's threshold ratio (median over seeds; > 1: past its own threshold) against the gap between its
    views in degrees, a panel per reading, a colour per smooth activation: solid the measured init (its gap
    scaled; the state as measured ringed), dashed the synthetic init (its view noise swept); the mean measured
    gap dotted, ratio 1 grey. ``curves[reading][activation][state]`` = (gaps, ratios, position of the measured
    state or None), NaN ratios (G not positive definite) not drawn; ``heads`` names the heads' widths."""
    readings = list(curves)
    fig, axes = new_figure(1, len(readings), figsize=(4.2 * len(readings) + 1.6, 3.4), squeeze=False)
    for ax, r in zip(axes[0], readings):
        for i, (act, states) in enumerate(curves[r].items()):
            style = series_style(i)
            for state, linestyle in (("measured", "-"), ("synthetic", "--")):
                if state in states:
                    xs, ys, at = states[state]
                    ax.plot(xs, ys, color=style["color"], marker=style["marker"], ms=4, linestyle=linestyle,
                            label=f"{act}, {state} init")
                    if at is not None:
                        ax.plot([xs[at]], [ys[at]], linestyle="none", marker="o", ms=10, mfc="none",
                                color="0.2", label="the state as measured")
        ax.axhline(1.0, color="0.5", lw=0.8, label="threshold (ratio 1)")
        if measured_gap is not None:
            ax.axvline(measured_gap, color="0.2", lw=0.9, ls=":", label=f"mean measured gap {measured_gap:.3g}°")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _degree_ticks(ax)
        ax.set_xlabel("gap between the views ∠(u, c) [degrees]")
        ax.set_title(r, fontsize=9)
    shared_ylabel(fig, "threshold ratio λ_max(−G^-1/2 M G^-1/2)\n(median over seeds)")
    shared_legend(list(axes[0]), title="head, state")
    fig.suptitle(f"C4: where the init sits against its threshold, by the gap between its views (heads: {heads})",
                 fontsize=9)
    return fig
