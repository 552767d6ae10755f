"""report.html from the results.json content: the claims report as one self-contained page.

The same content as report.md (headgeom.report.markdown), from the same results dict and the same
pieces (the summary's cells, each row's measured values and verdict, the experiments' run lines,
tables, notes): a line per claim that opens (``<details>``) onto its rows with their criteria and the
sections of the experiments that measured it, figures embedded as ``data:`` URIs, style and script
inline (headgeom.report.html_page), filters by evidence kind, verdict and source. Every string of
the results is escaped (headgeom.report.html_text). The page loads nothing: it can be mailed or
archived on its own.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from headgeom.claims.claim import natural_key
from headgeom.claims.evidence import KINDS, VERDICTS
from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS, is_authors, ours
from headgeom.io import atomic_write_text
from headgeom.report.html_page import FILTERS, page
from headgeom.report.html_text import inline, png_data_uri, text
from headgeom.report.markdown import (config_table, distinct_settings, environment_text, format_measured, group_table,
                                      home_claim, measured_parts, ood_text, rows_of, run_text, setting_text,
                                      summary_note, verdict_parts, warnings)
from headgeom.report.released_notice import released_notice
from headgeom.report.summary import by_claim, claim_line, source_parts
from headgeom.report.table import Table, table_html

__all__ = ["render_html", "source_key", "write_html"]

SOURCES = {"ours": "headgeom's runs", "authors": AUTHORS}
"""The values of the source filter: a row is the authors' (headgeom.claims.sources) or ours."""


def source_key(row: Row) -> str:
    """``"authors"`` for a row re-judging the authors' released runs, else ``"ours"`` (the filter's value)."""
    return "authors" if is_authors(row) else "ours"


def _slug(verdict: str) -> str:
    return verdict.replace(" ", "-")


def _select(name: str, label: str, options: list[tuple[str, str, int]]) -> str:
    opts = "".join(f'<option value="{text(v)}">{text(shown)} ({n})</option>' for v, shown, n in options)
    return (f'<label>{text(label)}<select name="{text(name)}"><option value="">all</option>{opts}</select>'
            "</label>")


def _filters(claims: list[Row], preset: str | None) -> str:
    """The filter form (hidden until the page's script shows it), options with their row counts."""
    kinds = Counter(c.evidence for c in claims)
    verdicts = Counter(c.verdict for c in claims)
    sources = Counter(source_key(c) for c in claims)
    labels = dict(SOURCES, ours=ours(preset) if preset else SOURCES["ours"])
    selects = {"evidence": _select("evidence", "evidence", [(k, k, kinds[k]) for k in KINDS if kinds[k]]),
               "verdict": _select("verdict", "verdict", [(v, v, verdicts[v]) for v in VERDICTS if verdicts[v]]),
               "source": _select("source", "source", [(s, labels[s], sources[s]) for s in SOURCES if sources[s]])}
    return (f'<form class="filters" hidden>{"".join(selects[k] for k in FILTERS)}'
            '<button type="button" class="reset">show all</button><output></output></form>')


def _cell(parts: list[str]) -> str:
    return "<br>".join(inline(p) for p in parts) or "-"


def _claim_summary(cid: str, rows: list[Row]) -> str:
    info = claim_line(cid, rows)
    mine = [r for r in rows if not is_authors(r)]
    theirs = [r for r in rows if is_authors(r)]
    return (f'<summary class="grid"><span class="id"><strong>{text(cid)}</strong></span>'
            f'<span>{text(info.short)}<span class="matches"></span></span><span>{text(info.paper)}</span>'
            f"<span>{_cell(source_parts(mine, format_measured))}</span>"
            f"<span>{_cell(source_parts(theirs, format_measured))}</span></summary>")


def _measured(c: Row) -> str:
    head, plain, grouped = measured_parts(c)
    parts = [f"<strong>{text(head[0])}: {text(head[1])}</strong>"] if head else []
    parts += [f"{text(k)}: {text(v)}" for k, v in plain]
    out = "<br>".join(parts) or "-"
    if grouped:
        out += (f"<details><summary>per {len(grouped)} groups</summary>{group_table(grouped).html()}"
                "</details>")
    return out


def _verdict(c: Row) -> str:
    words, qualifiers, budget, ood = verdict_parts(c)
    out = f'<span class="v {_slug(c.verdict)}">{text(words)}</span>{text(qualifiers)}'
    out += f"<br>{text(budget)}" if budget else ""
    return out + (f"<br><strong>{text(ood)}</strong>" if ood else "")


def _rows_table(rows: list[Row]) -> str:
    """The claim's rows: setting, measured (headline first), evidence, verdict, criterion; each ``tr.row``
    carries the fields the filters read."""
    head = "".join(f"<th>{h}</th>" for h in ("statement", "setting", "measured", "evidence", "verdict", "criterion"))
    body = []
    for c in rows:
        attrs = {"evidence": c.evidence, "verdict": c.verdict, "source": source_key(c)}
        data = " ".join(f'data-{k}="{text(attrs[k])}"' for k in FILTERS)
        body.append(f'<tr class="row" {data}><td>{text(c.statement)}</td><td>{text(setting_text(c))}</td>'
                    f'<td>{_measured(c)}</td><td><span class="kind">{text(attrs["evidence"])}</span></td>'
                    f"<td>{_verdict(c)}</td><td>{text(c.criterion)}</td></tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _figure(rel: str, root: Path | None) -> str:
    uri = png_data_uri(root / rel) if root is not None else None
    if uri is None:
        return f'<p class="warn">figure {text(rel)} is not beside the report</p>'
    return f'<figure><img src="{uri}" alt="{text(Path(rel).stem)}"><figcaption>{text(rel)}</figcaption></figure>'


def _config(config: Any) -> str:
    table = config_table(config)
    return table.html() if isinstance(table, Table) else f"<pre>{text(table)}</pre>"


def _experiment(eid: str, e: dict[str, Any], claims: list[Row], root: Path | None) -> str:
    """An experiment's section: what ran, its config, claims, tables, figures, notes, failures."""
    out = [f"<h3>{text(eid)}: {text(e.get('title', ''))}</h3>", f"<blockquote>{text(e.get('statement', ''))}"
           "</blockquote>", f"<p>{inline(run_text(e))}</p>",
           f"<details><summary>Resolved config</summary>{_config(e.get('config'))}</details>"]
    mine = [c for c in claims if c.experiment == eid]
    flagged = [(c, d) for c, d in zip(mine, distinct_settings(mine)) if c.out_of_distribution]
    if flagged:
        out.append("<p><strong>Heads evaluated out of distribution:</strong></p><ul>" + "".join(
            f"<li>{text(c.id)} ({text(d or c.statement)}): "
            f"{text(ood_text(c.out_of_distribution, format_measured))}</li>" for c, d in flagged) + "</ul>")
    for title, table in e.get("tables", []):
        out += [f"<h4>{inline(title)}</h4>", table_html(table)]
    if e.get("figures"):
        out += ["<h4>Figures</h4>"] + [_figure(f, root) for f in e["figures"]]
    if e.get("notes"):
        out.append("<h4>Notes</h4><ul>" + "".join(f"<li>{inline(n)}</li>" for n in e["notes"]) + "</ul>")
    if e.get("failed_cells"):
        out.append("<h4>Failed cells</h4><ul>" + "".join(
            f"<li><code>{text(f['key'])}</code>: {text(f['error'])} (traceback in <code>{text(f['error_file'])}"
            "</code>)</li>" for f in e["failed_cells"]) + "</ul>")
    if e.get("errors"):
        out.append("<h4>Errors in the summary</h4>"
                   + "".join(f"<pre>{text(err.rstrip())}</pre>" for err in e["errors"]))
    return "\n".join(out)


def render_html(results: dict[str, Any], root: str | os.PathLike | None = None) -> str:
    """The whole report.html from the results.json dict; figures (paths relative to ``root``, the
    report's folder) are read from there and embedded. A figure that is not there is said so."""
    root = Path(root) if root is not None else None
    exps = results.get("experiments", {})
    claims = rows_of(results)
    preset, seeds = results.get("preset"), results.get("seeds")
    groups = by_claim(claims)
    homes = {eid: home_claim(eid, claims) for eid in exps}
    notice = released_notice(results)
    out = ["<h1>headgeom: claims report</h1>", *([f'<p class="warn">{inline(notice)}</p>'] if notice else []),
           f"<p>Produced by <code>{text(results.get('command', 'headgeom reproduce'))}</code> (finished "
           f"{text(results.get('finished', '?'))}); preset <strong>{text(preset)}</strong>; seeds: "
           + (f"{text(seeds)} (--seeds)" if seeds is not None else "each experiment's preset default") + ".</p>"]
    out += [f'<p class="warn">{inline(w)}</p>' for w in warnings(results)]
    out += ["<h2>Summary</h2>", _filters(claims, preset),
            f'<div class="grid head"><span>claim</span><span>statement</span><span>paper</span>'
            f"<span>ours{f' ({text(preset)})' if preset else ''}</span><span>{text(AUTHORS)}</span></div>"]
    if not claims and not any(homes.values()):
        out.append("<p><em>No claim entries were produced.</em></p>")
    for cid in sorted(set(groups) | {h for h in homes.values() if h}, key=natural_key):
        rows = groups.get(cid, [])
        body = [_rows_table(rows) if rows else "<p><em>No claim rows (see below).</em></p>"]
        body += [_experiment(eid, e, claims, root) for eid, e in exps.items() if homes[eid] == cid]
        out.append(f'<details class="claim" data-claim="{text(cid)}">{_claim_summary(cid, rows)}'
                   f'<div class="body">{"".join(body)}</div></details>')
    out += [f'<p class="muted">{inline(summary_note())}</p>', "<h2>Details</h2>",
            f"<p>{inline(environment_text(results.get('environment', {})))}</p>",
            f"<p>Experiments: {text(', '.join(exps) or 'none')}. Evidence kinds:</p><ul>"
            + "".join(f"<li><code>{text(k.name)}</code>: {text(k.meaning)}.</li>" for k in KINDS.values()) + "</ul>"]
    orphans = [eid for eid, h in homes.items() if h is None]
    if orphans:
        out += ["<h2>Experiments without claim rows</h2>"] + [_experiment(eid, exps[eid], claims, root)
                                                              for eid in orphans]
    return page("headgeom: claims report", "\n".join(out))


def write_html(path: str | os.PathLike, results: dict[str, Any]) -> Path:
    """Write report.html atomically, its figures read from (and relative to) its folder."""
    path = Path(path)
    return atomic_write_text(path, render_html(results, path.parent))
