"""``headgeom analyze``'s report.md and terminal table, written from the result dict alone.

Every number printed is the JSON's value formatted with :func:`fmt` (4 significant digits), so
a report can always be checked against analysis.json. Layout: header (model, sha256, data,
preprocessing, protocol; or the .npz file and its arrays), a summary over families at the
head's last point, then per family the out-of-distribution flag (heads trained on raw z fed
z/‖z‖), the metrics at every point, the ratios z / point (the paper's compression beside the
global ratio, selectivity and the centred compression; the dimension-fair trace ratio and the
per-dimension ratio side by side, docs/paper.md §4 pitfall 4), the controls and the orbit figure;
then the tangent-metric and Fisher tables when they were computed.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["POINT_COLUMNS", "RATIO_COLUMNS", "fmt", "fmt_estimate", "format_report",
           "format_summary", "last_head_points", "last_points", "ood_lines", "summary_rows"]

POINT_COLUMNS = (("spread", "spread"), ("global_spread", "global spread"),
                 ("spread_centred", "spread (centred)"),
                 ("mean_pairwise_cosine", "mean pairwise cos"), ("d_intra", "D_intra"),
                 ("d_inter", "D_inter"), ("class_orbit_ratio", "class/orbit"),
                 ("orbit_effective_rank", "eff. rank"), ("curvature_raw", "curvature (raw)"),
                 ("curvature_arc", "curvature (arc)"), ("alignment", "alignment"))
RATIO_COLUMNS = (("compression", "compression (spread)"), ("global_ratio", "global ratio"),
                 ("selectivity", "selectivity"), ("compression_centred", "compression (centred)"),
                 ("trace_ratio", "trace ratio"), ("per_dim_ratio", "per-dim ratio"),
                 ("trace_ratio_raw", "trace ratio (raw f)"),
                 ("per_dim_ratio_raw", "per-dim ratio (raw f)"), ("d_intra_ratio", "D_intra ratio"),
                 ("class_orbit_change", "class/orbit change"))
SUMMARY_COLUMNS = ("compression", "global_ratio", "selectivity", "compression_centred",
                   "class_orbit_change")


def fmt(x: Any) -> str:
    """A number at 4 significant digits; None/NaN as "nan", infinities as "inf"/"-inf"."""
    if x is None:
        return "nan"
    if isinstance(x, str):
        return x
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def fmt_estimate(e: dict[str, Any] | None) -> str:
    """``value [lo, hi]`` of an estimate dict; "–" when absent; ``value [no CI: why]`` when the
    bootstrap gave no interval (``ci_undefined``, headgeom.orbits.bootstrap)."""
    if not e:
        return "–"
    if e.get("ci_undefined"):
        return f"{fmt(e.get('value'))} [no CI: {e['ci_undefined'].split(':')[0]}]"
    ci = e.get("ci") or [None, None]
    return f"{fmt(e.get('value'))} [{fmt(ci[0])}, {fmt(ci[1])}]"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def last_head_points(fam: dict[str, Any]) -> list[str]:
    """The last point of each head of each input variant: h(z) (``head.i``), p(h(z)) with a
    predictor (``pred.j``), and their ``l2z/`` versions, in forward order."""
    return last_points(list(fam.get("ratios", {})))


def last_points(points: list[str]) -> list[str]:
    """The last of each group ``<variant/><head>.<i>`` of point names ("z" left out)."""
    last: dict[str, str] = {}
    for p in points:
        if p != "z":
            last[p.rsplit(".", 1)[0]] = p
    return list(last.values())


def summary_rows(result: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(family, point, {column: estimate}) at the last head point(s), with the controls'
    compression (fresh head, random directions) for the same point."""
    rows = []
    for name, fam in result["orbits"]["families"].items():
        for p in last_head_points(fam):
            cells = {c: fam["ratios"][p].get(c) for c in SUMMARY_COLUMNS}
            ctrl = fam.get("controls", {})
            for key in ("fresh_head", "random_directions"):
                cells[key] = ctrl.get(key, {}).get("ratios", {}).get(p, {}).get("compression")
            rows.append((name, p, cells))
    return rows


def format_summary(result: dict[str, Any]) -> str:
    """A short plain-text table for the terminal: the head's effect on each family's orbits."""
    rows = summary_rows(result)
    if not rows:
        return "no head in the checkpoint: per-point metrics of z only (see report.md)"
    head = f"{'family':<12} {'point':<12} {'compression [95% CI]':<30} {'global':>8} " \
           f"{'selectivity [95% CI]':<30} {'centred':>8} {'cls/orb chg':>11} {'fresh':>8} " \
           f"{'random':>8}"
    lines = [head]
    for fam, p, c in rows:
        v = lambda k: fmt((c.get(k) or {}).get("value"))  # noqa: E731
        lines.append(f"{fam:<12} {p:<12} {fmt_estimate(c['compression']):<30} "
                     f"{v('global_ratio'):>8} {fmt_estimate(c['selectivity']):<30} "
                     f"{v('compression_centred'):>8} {v('class_orbit_change'):>11} "
                     f"{v('fresh_head'):>8} {v('random_directions'):>8}")
    flagged = sorted({p for name, fam in result["orbits"]["families"].items()
                      for p in (fam.get("out_of_distribution") or {}).get("points", {})
                      if p in {q for f, q, _ in rows if f == name}})
    if flagged:
        lines.append(f"out of distribution (head trained on raw z, fed z/||z||): {', '.join(flagged)}; "
                     f"see report.md")
    return "\n".join(lines)


def _vec(v: Any) -> str:
    return "none" if v is None else "(" + ", ".join(fmt(x) for x in v) + ")"


def _header(result: dict[str, Any]) -> list[str]:
    m, pre, d = result["model"], result["preprocessing"], result["data"]
    proto = result["orbits"]["protocol"]
    check = m.get("sha256_check") or {}
    ranges = proto.get("value_ranges") or {}
    fams = ", ".join(f"{f} ({ranges[f][0]:g} to {ranges[f][1]:g})" if f in ranges else f
                     for f in proto["families"])
    lines = [
        f"# headgeom analyze: {m['path']}", "",
        f"- model: release `{m['release']}`, backbone {m['backbone']['name']} "
        f"{m['backbone']['options']}, head `{m.get('head') or 'none'}`",
        f"- sha256: `{m['sha256']}` ({check.get('status', 'unknown')}"
        + (f": {check['message']}" if check.get("message") else "") + ")",
        f"- data: {d['name']}/{d['split']}, {d['n_images']} images (seed {d['seed']}, balanced over "
        f"{len(d['per_class'])} classes: {d['per_class']})",
        f"- preprocessing: {pre['reason']}; side {pre['size'] or 'native'}, mean "
        f"{_vec(pre['mean'])}, std {_vec(pre['std'])}; {pre['order']}",
        f"- orbits: {proto['steps']} steps per family; families {fams}; head input "
        f"{', '.join(proto['head_input'])} (raw = h(z), l2 = the paper's h(z/‖z‖), docs/paper.md §4 "
        f"pitfall 5)",
        f"- statistics: {fmt(100 * proto['level'])}% intervals, bootstrap {proto['bootstrap']}, "
        f"B = {proto['n_boot']}; {proto['precision']}",
        f"- device {result.get('device')}, {fmt(result.get('seconds', {}).get('total'))} s in all",
    ]
    return lines


def _npz_header(result: dict[str, Any]) -> list[str]:
    src, d = result["source"], result["data"]
    proto = result["orbits"]["protocol"]
    arrays = ", ".join(f"`{k}` {tuple(v['shape'])} {v['dtype']}" for k, v in src["arrays"].items())
    labels = (f"labels: {len(d['per_class'])} classes {d['per_class']}" if d.get("per_class")
              else "no labels (D_inter and the class/orbit ratio not computed)")
    return [
        f"# headgeom analyze: {src['path']}", "",
        f"- orbit embeddings computed elsewhere (.npz): {arrays}",
        f"- sha256: `{src['sha256']}`",
        f"- {d['n_images']} orbits of {proto['steps']} steps; family `{proto['families'][0]}`; {labels}",
        f"- statistics: {fmt(100 * proto['level'])}% intervals, bootstrap {proto['bootstrap']}, "
        f"B = {proto['n_boot']}; {proto['precision']}",
        f"- {fmt(result.get('seconds', {}).get('total'))} s in all",
    ]


def ood_lines(fam: dict[str, Any]) -> list[str]:
    """The out-of-distribution flag of one family: a line per flagged last head point."""
    ood = fam.get("out_of_distribution")
    if not ood:
        return []
    lines = [f"**Out of distribution**: {ood['why']}.", ""]
    for p in last_points(list(ood["points"])):
        e = ood["points"][p]
        raw = (f"; fed raw z (`{e['raw_input_point']}`): "
               f"{fmt_estimate(e['raw_input_mean_pairwise_cosine'])}") if e.get("raw_input_point") else ""
        lines.append(f"- `{p}`: mean pairwise cosine {fmt_estimate(e['mean_pairwise_cosine'])}{raw}")
    return lines


def _family_section(name: str, fam: dict[str, Any]) -> list[str]:
    xi = fam["xi"]
    lines = ["", f"## {name}", "",
             f"ξ from {xi[0]:g} to {xi[-1]:g} ({fam['units']}), {len(xi)} steps; anchor: "
             f"{fam['anchor']}.", ""]
    ood = ood_lines(fam)
    if ood:
        lines += ood + [""]
    lines += ["### Metrics at every point", ""]
    rows = [[p, str(fam["dims"][p])] + [fmt_estimate(m.get(k)) for k, _ in POINT_COLUMNS]
            for p, m in fam["points"].items()]
    lines.append(_table(["point", "D"] + [t for _, t in POINT_COLUMNS], rows))
    if fam.get("ratios"):
        lines += ["", "### Ratios z / point", ""]
        rows = [[p] + [fmt_estimate(r.get(k)) for k, _ in RATIO_COLUMNS]
                for p, r in fam["ratios"].items()]
        lines.append(_table(["point"] + [t for _, t in RATIO_COLUMNS], rows))
    ctrl = fam.get("controls")
    if ctrl and "omitted" in ctrl:
        lines += ["", f"Controls: {ctrl['omitted']}."]
    elif ctrl:
        lines += ["", "### Controls at the head's output", ""]
        rows = []
        for p in last_head_points(fam):
            rows.append(["trained head", p] + [fmt_estimate(fam["ratios"][p].get(k))
                                               for k, _ in RATIO_COLUMNS])
            for key, label in (("fresh_head", "fresh head"), ("random_directions", "random directions")):
                r = ctrl.get(key, {}).get("ratios", {}).get(p, {})
                rows.append([label, p] + [fmt_estimate(r.get(k)) for k, _ in RATIO_COLUMNS])
        lines.append(_table(["", "point"] + [t for _, t in RATIO_COLUMNS], rows))
        lines += [""] + [f"- {ctrl[k]['what']}" for k in ("fresh_head", "random_directions")
                         if k in ctrl]
    lines += ["", f"![{name} orbits](figures/orbits_{name}.png)"]
    return lines


QUOTIENT_METRICS = (("head_G", "G = J_hᵀJ_h (z)"), ("head_loss", "J_hᵀ∇²L J_h (z)"),
                    ("backbone", "J_bᵀJ_b (pixels)"), ("end_to_end", "(J_hJ_b)ᵀ(J_hJ_b) (pixels)"))
QUOTIENT_COLUMNS = ("median log10 q (tangent)", "median log10 q (random)",
                    "ratio of medians [95% CI]", "P(q_t < q_r)", "tangents below random median",
                    "q_t = 0")


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def quotient_rows(fam: dict[str, Any]) -> list[list[str]]:
    """One row per metric of a tangent-metric family entry (tangent vs random directions)."""
    rows = []
    for key, label in QUOTIENT_METRICS:
        q = fam.get(key)
        if not q:
            continue
        rows.append([label, fmt(_get(q, "tangent", "median_log10")),
                     fmt(_get(q, "random", "median_log10")), fmt_estimate(q.get("ratio_ci")),
                     fmt(q.get("p_below")), fmt(q.get("frac_tangent_below_random_median")),
                     fmt(_get(q, "tangent", "n_zero"))])
    return rows


def fisher_row(name: str, fam: dict[str, Any], tol: str) -> list[str]:
    """Fisher ranks of one family at relative tolerance ``tol`` (the key, e.g. "1e-06")."""
    f = fam.get("fisher") or {}
    chart, head = f.get("chart") or {}, f.get("head") or {}
    med = lambda d: fmt(_get(d, tol, "median"))  # noqa: E731
    return [name, fmt(chart.get("dim_theta")), med(chart.get("rank_z")), med(chart.get("rank_h")),
            fmt(_get(chart, "bound_holds", tol)), f"{fmt(head.get('d'))}",
            med(head.get("rank")), fmt(_get(head, "null_space", tol, "tangent_mostly_null")),
            fmt(_get(head, "null_space", tol, "random_mostly_null"))]


def _tangent_section(tm: dict[str, Any], has_figure: bool) -> list[str]:
    lines = ["", "## Tangent metric and Fisher rank (C6, C7)", ""]
    if "skipped" in tm:
        return lines + [f"Not computed: {tm['skipped']}."]
    proto = tm.get("protocol", {})
    tol = proto.get("fisher", {}).get("rel_tol")
    tol_key = f"{float(tol):g}" if tol is not None else ""
    lines += [f"{proto.get('n_images')} images, {proto.get('n_random')} random directions per "
              f"image, {proto.get('dtype')}; loss {_get(proto, 'loss', 'name')} "
              f"({_get(proto, 'loss', 'reading')}); tangents at ξ0 = {proto.get('xi0')}. "
              f"q = vᵀAv/‖v‖²; a ratio of medians < 1 means A suppresses the augmentation "
              f"tangent against random directions.", ""]
    for fam, entry in tm.get("families", {}).items():
        rows = quotient_rows(entry)
        if rows:
            check = entry.get("tangent_check") or {}
            lines += [f"### {fam}", "", _table(["metric A"] + list(QUOTIENT_COLUMNS), rows), "",
                      f"jvp tangent against the central difference: median relative error "
                      f"{fmt(check.get('rel_err_median'))}, max {fmt(check.get('rel_err_max'))}.", ""]
    fams = tm.get("families", {})
    if fams:
        lines += [f"### Fisher ranks at tolerance {tol_key} · λ_max", "",
                  f"Observation model: {_get(proto, 'fisher', 'observation_model')}. Medians over "
                  f"images; Thm 5.3 predicts rank I_h(θ) ≤ rank I_z(θ) − 1.", ""]
        lines.append(_table(["family", "dim θ", "rank I_z(θ)", "rank I_h(θ)", "bound holds",
                             "d", "rank I_h(z)", "tangents mostly null", "random mostly null"],
                            [fisher_row(f, e, tol_key) for f, e in fams.items()]))
    if has_figure:
        lines += ["", "![tangent spectra](figures/tangent_spectra.png)"]
    defs = tm.get("definitions", {})
    if defs:
        lines += ["", "Definitions:", ""] + [f"- `{k}`: {v}" for k, v in defs.items()]
    return lines


def format_report(result: dict[str, Any]) -> str:
    """The whole report.md (markdown) of a ``headgeom analyze`` result."""
    lines = _npz_header(result) if "source" in result else _header(result)
    rows = summary_rows(result)
    if rows:
        lines += ["", "## Summary: the head's last point", "",
                  "Ratios are z over the point (> 1: the head shrinks the orbit). selectivity = "
                  "compression / global ratio (> 1: orbits shrink more than the whole cloud; about 1: "
                  "the head shrinks everything alike). compression (centred): on features centred "
                  "before normalising. fresh / random: compression of a freshly initialised head / "
                  "of random directions of equal size.", ""]
        cols = list(SUMMARY_COLUMNS) + ["fresh_head", "random_directions"]
        titles = ["compression (spread)", "global ratio", "selectivity", "compression (centred)",
                  "class/orbit change", "fresh head compression", "random directions compression"]
        lines.append(_table(["family", "point"] + titles,
                            [[f, p] + [fmt_estimate(c.get(k)) for k in cols] for f, p, c in rows]))
        flagged = [(f, p) for f, p, _ in rows
                   if p in (result["orbits"]["families"][f].get("out_of_distribution") or {})
                   .get("points", {})]
        if flagged:
            lines += ["", "Out of distribution (a head trained on raw z fed z/‖z‖; see each family): "
                      + ", ".join(f"{f} `{p}`" for f, p in flagged) + "."]
    for name, fam in result["orbits"]["families"].items():
        lines += _family_section(name, fam)
    has_fig = any(str(p).endswith("tangent_spectra.png")
                  for p in result.get("files", {}).get("figures", []))
    lines += _tangent_section(result.get("tangent_metric") or {"skipped": "not run"}, has_fig)
    lines += ["", "## Definitions", ""]
    lines += [f"- `{k}`: {v}" for k, v in result["orbits"]["definitions"].items()]
    notes = (result.get("model") or {}).get("notes") or []
    if notes:
        lines += ["", "## Loader notes", ""] + [f"- {n}" for n in notes]
    if result.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"
