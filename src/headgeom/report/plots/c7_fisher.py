"""C7's figure (docs/paper.md §2 C7, Thm 5.3): the numerical ranks of I_z and I_h against the
relative tolerance, before and after training, with the bound rank(I_z) − dim V_aug, from
:mod:`headgeom.experiments.c7_fisher`'s cells."""
from __future__ import annotations

from typing import Any

from headgeom.claims.estimates import measured
from headgeom.report.style import new_figure, series_style, shared_legend


def ranks_vs_tolerance(by_regime: dict[str, list[dict]], stages: tuple[str, ...], tol_sweep: tuple[float, ...],
                       rel_tol: float, dim_aug: int) -> Any:
    """Mean rank over seeds against the tolerance, a panel per regime (in ``by_regime``'s order).

    ``by_regime[regime]``: the metrics of that regime's cells, each with ``"<stage>.rank_Iz@<tol>"``
    and ``"<stage>.rank_Ih@<tol>"`` for every stage and tolerance of ``tol_sweep`` (``f"{tol:g}"``).
    A colour per quantity (I_z, I_h), stages dashed then solid; the bound is the mean rank of I_z
    after training minus ``dim_aug``, dotted black; a grey line marks ``rel_tol``.
    """
    regimes = list(by_regime)
    fig, axes = new_figure(1, len(regimes), figsize=(4.6 * len(regimes), 3.4), squeeze=False, sharey=True)
    for ax, regime in zip(axes[0], regimes):
        ms = by_regime[regime]
        for stage, ls in zip(stages, ("--", "-")):
            for k, color in (("rank_Iz", series_style(0)["color"]), ("rank_Ih", series_style(1)["color"])):
                ys = [measured([m[f"{stage}.{k}@{t:g}"] for m in ms])["value"] for t in tol_sweep]
                ax.plot(tol_sweep, ys, ls, color=color, marker="o", label=f"{k} ({stage})")
        bound = [measured([m[f"after.rank_Iz@{t:g}"] for m in ms])["value"] - dim_aug for t in tol_sweep]
        ax.plot(tol_sweep, bound, ":", color="k", label=f"bound rank_Iz (after) - {dim_aug}")
        ax.axvline(rel_tol, color="0.6", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("rel_tol (Fisher eigenvalues > rel_tol · λ_max)")
        ax.set_title(regime)
    axes[0][0].set_ylabel("numerical rank (mean over points and seeds)")
    shared_legend(list(axes[0]))
    fig.suptitle("C7: ranks of I_z and I_h against the tolerance")
    return fig
