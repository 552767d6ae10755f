"""report.md from the results.json content: the bottom lines first, a one-screen summary, then the details per claim.

The report is readable on its own: the command that produced it, the bottom line of each claim
(headgeom.report.bottom_lines, by the rule of headgeom.claims.bottom_line, stated under them), a summary
line per claim (headgeom.report.summary), the code version and environment, then per claim its bottom line
and its rows with their measured values as ``value ± spread (n=…)``, view gap, evidence kind, verdict,
budget, conventions with their robustness, and criterion (the ``diagnostic`` rows apart, never counted),
followed by the sections of the experiments that measured it: what was run (config, cells, time), tables,
figures (relative links into ``figures/``), notes and failed cells.
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from headgeom.claims.budget import LIMITED_BELOW, LIMITED_LABEL, budget_text
from headgeom.claims.claim import claim_of, natural_key
from headgeom.claims.estimates import SPREAD_KIND, format_estimate
from headgeom.claims.evidence import DIAGNOSTIC, KINDS, counts_text, verdict_text
from headgeom.claims.ood import OutOfDistribution
from headgeom.claims.row import Row
from headgeom.io import atomic_write_text
from headgeom.report.bottom_lines import (bottom_lines_of, bottom_lines_table, conclusion_cell, rule_note,
                                          stale_bottom_lines)
from headgeom.report.released_notice import released_notice
from headgeom.report.summary import by_claim, summary_table
from headgeom.report.table import Table, cell_text

DEFAULT_SPREAD_KIND = SPREAD_KIND  # the spread of headgeom.claims.estimates.measured: not repeated per value


def _num(x: Any) -> str:
    if x is None:
        return "nan"
    if isinstance(x, bool) or isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if math.isfinite(x) else str(x)
    return str(x)


def _secs(s: Any) -> str:
    return f"{s:.3g} s" if isinstance(s, (int, float)) else "? s"


def format_measured(m: Any) -> str:
    """``value ± spread (n=…)`` for a :func:`headgeom.claims.estimates.measured` entry, the claims
    table's long form (4 significant digits, the spread kind when not the default); other values as text."""
    if not isinstance(m, Mapping) or "value" not in m:
        return _num(m)
    text = format_estimate(m, _num, _num)
    ci = m.get("ci")
    if m.get("spread") is None and isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci:
        text += f" [{_num(ci[0])}, {_num(ci[1])}]"  # an interval where there is no spread (one model, bootstrap)
    text += f" (n={m.get('n', '?')})"
    kind = m.get("spread_kind")
    if kind and kind != DEFAULT_SPREAD_KIND:
        text += f" [{kind}]"
    return text


def _setting(setting: Any) -> str:
    if isinstance(setting, dict):
        return "; ".join(f"{k}={v}" for k, v in setting.items())
    return str(setting)


def evidence_legend() -> str:
    """One line per evidence kind: what its verdicts mean."""
    return "\n".join(f"- `{k.name}`: {k.meaning}." for k in KINDS.values()) + "\n"


GROUPED = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<group>[^\[\]]+)\]$")


def split_measured(measured: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(plain entries, {group: {name: entry}}) of a row's ``measured``: keys ``name[group]`` (one value per
    activation, run or depth) are gathered into a small table instead of one cell of many values."""
    plain: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in measured.items():
        match = GROUPED.match(key)
        if match:
            grouped.setdefault(match["group"], {})[match["name"]] = value
        else:
            plain[key] = value
    return plain, grouped


def group_table(grouped: dict[str, dict[str, Any]]) -> Table:
    """One line per group (activation, run, ...), one column per measured name."""
    names = list(dict.fromkeys(n for row in grouped.values() for n in row))
    table = Table(["", *names])
    for g, row in grouped.items():
        table.add(g, *(format_measured(row[n]) if n in row else "-" for n in names))
    return table


DIAGNOSTIC_NOTE = ("**Diagnostic rows, never counted:** the reading or the construction fixes their outcome, so "
                   "they could not have come out the other way (each criterion says why); they are shown to explain "
                   "what a reading does, not as evidence for or against the claim.")


def claims_table(rows: list[Row]) -> str:
    """The markdown claims table: id, statement, setting, measured, evidence, verdict, criterion; the
    ``diagnostic`` rows apart in a second table under :data:`DIAGNOSTIC_NOTE`. A row's headline (the measure its
    verdict quotes, in words where the row has them) comes first in its measured cell, its view gap after it;
    its verdict cell names its conventions and each one's robustness status. Values per group (``name[group]``
    keys) and the robustness sweeps follow the tables as small tables per row."""
    if not rows:
        return "_No claim entries were produced._\n"
    counted = [r for r in rows if r.evidence != DIAGNOSTIC]
    diagnostics = [r for r in rows if r.evidence == DIAGNOSTIC]
    details: list[str] = []
    parts = [_rows_table(counted, 1, details).markdown()] if counted else []
    if diagnostics:
        parts.append(DIAGNOSTIC_NOTE + "\n\n" + _rows_table(diagnostics, len(counted) + 1, details).markdown())
    return ("\n\n".join(parts) + f"\n\nSpread: {DEFAULT_SPREAD_KIND} unless stated in brackets. Rows: "
            f"{counts_text(rows)}; only `test` rows count as support.\n"
            + ("\n" + "\n".join(details) if details else ""))


def _rows_table(rows: list[Row], first: int, details: list[str]) -> Table:
    """The table of ``rows`` numbered from ``first``; their group and robustness tables appended to ``details``."""
    table = Table(("row", "id", "statement", "setting", "measured", "evidence", "verdict", "criterion"))
    for i, c in enumerate(rows, first):
        head, plain, grouped = measured_parts(c)
        parts = [headline_cell(c, head[1])] if head else []
        parts += [f"view gap: {view_gap_text(c)}"] if c.view_gap is not None else []
        parts += [f"{k}: {v}" for k, v in plain]
        if grouped:
            parts.append(f"per {len(grouped)} groups: table {i} below")
            details += [f"Table {i} ({c.id}, {_setting_short(c)}):", "", group_table(grouped).markdown(), ""]
        if c.robustness:
            details += [f"Robustness of row {i} ({c.id}, {_setting_short(c)}):", "", robustness_table(c).markdown(), ""]
        words, qualifiers, budget, ood = verdict_parts(c)
        verdict = "<br>".join([f"**{words}**{qualifiers}"] + ([budget] if budget else []) + ([f"**{ood}**"] if ood else [])
                              + conventions_lines(c))
        table.add(i, c.id, c.statement, setting_text(c), "<br>".join(parts) or "-", c.evidence, verdict, c.criterion)
    return table


def headline_cell(c: Row, value: str) -> str:
    """The headline in the details: its words in bold with the measured key after them, then its value."""
    if c.headline_text:
        return f"**{c.headline_text}** (`{c.headline}`): **{value}**"
    return f"**{c.headline}: {value}**"


def view_gap_text(c: Row) -> str:
    """The row's measured angle between the two views' head outputs, e.g. "5.6 ± 0.4 (n=2)"."""
    return format_measured(c.view_gap) if c.view_gap is not None else ""


def conventions_lines(c: Row) -> list[str]:
    """"conventions: a, b" and "robustness: a robust; b flips at 0.3" (each convention named, swept or not);
    none for a row that names none (a test row that names none is an error of its experiment's summary)."""
    if not c.conventions:
        return []
    status = "; ".join(f"{k} not swept" if k in c.unswept else f"{k} {c.robustness[k].status}" for k in c.conventions)
    return [f"conventions: {', '.join(c.conventions)}", f"robustness: {status}"]


def robustness_table(c: Row) -> Table:
    """One line per convention swept: the row's own value, each value tried with its verdict, the status."""
    table = Table(("convention", "at", "verdict at each value", "status"))
    for name, r in c.robustness.items():
        table.add(name, _num(r.at), "; ".join(f"{_num(v)}: {w}" for v, w in zip(r.values, r.verdicts)), r.status)
    return table


def measured_parts(c: Row) -> tuple[tuple[str, str] | None, list[tuple[str, str]], dict[str, dict[str, Any]]]:
    """A row's measured values as both renderers show them: (headline (key, text), the other plain entries as
    (key, text), the ``name[group]`` entries by group for :func:`group_table`)."""
    plain, grouped = split_measured(c.measured)
    head = (c.headline, format_measured(c.headline_entry))
    return head, [(k, format_measured(v)) for k, v in plain.items() if k != c.headline], grouped


def ood_text(flag: OutOfDistribution | None, format_measured: Callable[[Any], str]) -> str:
    """"out of distribution: <why>; mean pairwise cosine at the head 0.994 ± 0.002 (n=2) (near 1: ...)", "" for
    None."""
    if not flag:
        return ""
    return (f"out of distribution: {flag.why}; mean pairwise cosine at the head "
            f"{format_measured(flag.mean_pairwise_cosine_h)} (near 1: every input maps near one direction)")


def verdict_parts(c: Row) -> tuple[str, str, str, str]:
    """A row's verdict cell, as both renderers show it: (the verdict words, what qualifies them, e.g.
    ", budget-limited (1 of 4 cells failed)", the budget line, the out-of-distribution flag); "" where absent."""
    qualifiers = limited_label(c) + (f" ({c.incomplete})" if c.incomplete else "")
    budget = ""
    if c.budget:
        basis = f" ({c.budget.basis})" if c.budget.basis else ""
        budget = f"budget: {budget_text(c.budget, label=False)}{basis}"
    return verdict_text(c), qualifiers, budget, ood_text(c.out_of_distribution, format_measured)


def setting_text(c: Row) -> str:
    """A row's setting as ``key=value; ...``, its source last."""
    return _setting(c.setting) + (f"; source={c.source}" if c.source else "")


def _setting_short(c: Row) -> str:
    s = c.setting
    keys = ("state", "reading", "part", "preset")
    return ", ".join(f"{k} {s[k]}" for k in keys if s.get(k)) or c.statement[:60]


def count_noun(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 claim"``, ``"3 claims"``: ``n`` and the noun in the number it takes."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def distinct_settings(group: list[Row], prefer: tuple[str, ...] = ()) -> list[str]:
    """Per row, the ``key=value`` of the setting keys whose values differ within ``group``; with ``prefer``,
    only those of its keys that differ, when any does."""
    settings = [r.setting for r in group]
    keys = list(dict.fromkeys(k for s in settings for k in s))
    varying = [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1]
    varying = [k for k in varying if k in prefer] or varying
    return [", ".join(f"{k}={s[k]}" for k in varying if k in s) for s in settings]


def limited_label(c: Row) -> str:
    """", budget-limited" for a verdict reached below the budget threshold of headgeom.claims.budget."""
    return f", {LIMITED_LABEL}" if c.budget and c.budget.limited else ""


def config_table(config: Any) -> Table | str:
    """The resolved config as a table of ``field | `value``` (nested keys dotted); text when it is no dict."""
    if not isinstance(config, dict):
        return f"`{cell_text(config)}`"
    if not config:
        return "_(empty config)_"
    table = Table(("field", "value"))
    for k, v in dotted(config).items():
        table.add(k, f"`{v}`")
    return table


def dotted(config: dict[str, Any]) -> dict[str, Any]:
    """A nested config (``train``, ``system``: the only dicts at the top of a resolved config) one row
    per field, named as ``headgeom reproduce --set`` names it: ``train.batch_size``."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict) and v:
            out.update({f"{k}.{sub}": val for sub, val in v.items()})
        else:
            out[k] = v
    return out


def environment_text(env: dict[str, Any]) -> str:
    v = env.get("versions", {})
    dirty = {True: " (uncommitted changes to tracked files)", False: "", None: " (dirty state unknown)"}
    rev = env.get("git_revision", "unknown")
    versions = ", ".join(f"{k} {val}" for k, val in v.items())
    return (f"Code: git `{rev}`{dirty.get(env.get('git_dirty'), '')}. Versions: {versions}. "
            f"Platform: {env.get('platform', '?')}, torch threads {env.get('torch_threads', '?')}, "
            f"CUDA {'available' if env.get('cuda') else 'not used/available'}.")


def run_text(e: dict[str, Any]) -> str:
    """What an experiment ran: cells (failed, reused), seeds, time, where its run directories are."""
    reused = f", {e['n_reused']} reused from an earlier run" if e.get("n_reused") else ""
    return (f"**Run:** {count_noun(e['n_cells'], 'cell')} ({e['n_failed']} failed{reused}), "
            f"seeds {e.get('seeds', '?')}; "
            f"{_secs(e['elapsed_s'])} in this invocation, {_secs(e.get('cells_elapsed_s', 0.0))} of cell time "
            f"in total; run directories `{e.get('runs', '')}/`.")


def summary_note() -> str:
    """What the summary's words mean (kinds, budget, "proof", the two sources); under the summary."""
    return ("Verdicts count only `test` rows as support; `identity` rows hold by construction (a failure is a bug), "
            "`premise` rows say whether a theorem applies, `diagnostic` rows show what a reading or a construction "
            "fixes and are never counted. \"budget\" is the images seen against the paper's "
            f"(steps × batch), {LIMITED_LABEL} below {LIMITED_BELOW:.0%}. \"paper: proof\" marks a theorem, "
            "which the paper proves rather than measures. \"ours\" are headgeom's runs at this preset; \"authors' runs, "
            "re-judged\" are the paper's own released runs (docs/paper.md §3.8) judged by the same rules, at their budget.")


def config_markdown(config: Any) -> str:
    """:func:`config_table` as markdown, with its trailing newline."""
    table = config_table(config)
    return (table.markdown() if isinstance(table, Table) else table) + "\n"


def _experiment_section(eid: str, e: dict[str, Any], rows: list[Row]) -> list[str]:
    out = [f"### {eid}: {e['title']}", "", f"> {e['statement']}", ""]
    out += [run_text(e), ""]
    out += ["<details><summary>Resolved config</summary>", "", config_markdown(e.get("config")), "</details>", ""]
    mine = [r for r in rows if r.experiment == eid]
    if mine:
        out += ["Claims: " + "; ".join(f"{r.id} **{verdict_text(r)}** ({r.evidence})" for r in mine), ""]
        flagged = [(r, d) for r, d in zip(mine, distinct_settings(mine)) if r.out_of_distribution]
        if flagged:  # the rows named by the setting keys that tell them apart
            out += ["**Heads evaluated out of distribution:**", ""]
            out += [f"- {r.id} ({d or r.statement}): {ood_text(r.out_of_distribution, format_measured)}"
                    for r, d in flagged] + [""]
    for title, table in e.get("tables", []):
        out += [f"#### {title}", "", table.rstrip(), ""]
    if e.get("figures"):
        out += ["#### Figures", ""]
        out += [f"![{Path(f).stem}]({f})" for f in e["figures"]] + [""]
    if e.get("notes"):
        out += ["#### Notes", ""] + [f"- {n}" for n in e["notes"]] + [""]
    if e.get("failed_cells"):
        out += ["#### Failed cells", ""]
        out += [f"- `{f['key']}`: {f['error']} (traceback in `{f['error_file']}`)" for f in e["failed_cells"]]
        out += [""]
    if e.get("errors"):
        out += ["#### Errors in the summary", ""] + ["```\n" + err.rstrip() + "\n```" for err in e["errors"]] + [""]
    return out


def home_claim(eid: str, rows: list[Row]) -> str | None:
    """The claim id an experiment's section sits under: that of its first row (GRID → C5), else its
    own id when it names a claim (an experiment whose cells all failed), else None."""
    ids = [r.id for r in rows if r.experiment == eid]
    if ids:
        return ids[0]
    return eid if re.fullmatch(r"C\d+", eid) else None


def rows_of(results: Mapping[str, Any]) -> list[Row]:
    """The claim rows of a results.json dict, each checked (:meth:`headgeom.claims.row.Row.from_json`)."""
    return [Row.from_json(c) for c in results.get("claims", [])]


def warnings(results: dict[str, Any]) -> list[str]:
    """The report's warnings under its summary: failed cells and summary steps, experiment modules that
    did not import, stored bottom lines that are not the rule's; none when all ran."""
    exps = results.get("experiments", {})
    n_failed = sum(e.get("n_failed", 0) for e in exps.values())
    n_errors = sum(len(e.get("errors", [])) for e in exps.values())
    out = []
    if n_failed or n_errors:
        out.append(f"**Warning:** {count_noun(n_failed, 'cell')} failed and {count_noun(n_errors, 'summary step')} "
                   "raised; see the experiment sections. Verdicts marked incomplete were measured on the remaining "
                   "cells.")
    if results.get("load_errors"):
        out.append("**Experiment modules that failed to import:** "
                   + "; ".join(f"`{m}`: {err}" for m, err in results["load_errors"].items()))
    stale = stale_bottom_lines(results, rows_of(results))
    if stale:
        out.append(f"**Warning:** the bottom lines results.json stores for {', '.join(stale)} are not what the rule "
                   "gives on its rows (a file of another version, or edited): rerun `headgeom reproduce` on the same "
                   "folder to rewrite them")
    return out


def render_report(results: dict[str, Any]) -> str:
    """The whole report.md text from the results.json dict: the one-screen summary (a line per claim),
    then per claim its rows and the sections of the experiments that measured it."""
    exps = results.get("experiments", {})
    rows = rows_of(results)
    seeds = results.get("seeds")
    summary = (summary_table(rows, format_measured, results.get("preset")).markdown() + "\n" if rows
               else "_No claim entries were produced._\n")
    bottoms = bottom_lines_of(results, rows)
    bottom = {b.claim: b for b in bottoms}
    notice = released_notice(results)
    lines = ["# headgeom: claims report", "", *([notice, ""] if notice else []),
             f"Produced by `{results.get('command', 'headgeom reproduce')}` (finished {results.get('finished', '?')}); "
             f"preset **{results.get('preset')}**; seeds: "
             + (f"{seeds} (--seeds)" if seeds is not None else "each experiment's preset default") + ".", "",
             "## Bottom lines", "", bottom_lines_table(bottoms, rows).markdown() if bottoms else "_No claim rows._", "",
             rule_note(), "", "## Summary", "", summary, summary_note(), ""]
    for warning in warnings(results):
        lines += [warning, ""]
    lines += ["## Details", "", environment_text(results.get("environment", {})), "",
              f"Experiments: {', '.join(exps) or 'none'}. Evidence kinds:", "", evidence_legend()]
    groups = by_claim(rows)
    homes = {eid: home_claim(eid, rows) for eid in exps}
    for cid in sorted(set(groups) | {h for h in homes.values() if h}, key=natural_key):
        group = groups.get(cid, [])
        short = claim_of(cid, group[0].statement if group else "").short
        lines += [f"## {cid}: {short}", ""]
        lines += [f"**Bottom line:** {conclusion_cell(bottom[cid])}", ""] if cid in bottom else []
        lines += [claims_table(group) if group else "_No claim rows (see below)._\n"]
        for eid, e in exps.items():
            if homes[eid] == cid:
                lines += _experiment_section(eid, e, rows)
    orphans = [eid for eid, h in homes.items() if h is None]
    if orphans:
        lines += ["## Experiments without claim rows", ""]
        for eid in orphans:
            lines += _experiment_section(eid, exps[eid], rows)
    return "\n".join(lines).rstrip() + "\n"


def write_report(path: str | os.PathLike, results: dict[str, Any]) -> Path:
    """Write report.md atomically; figure links are relative to its folder."""
    return atomic_write_text(path, render_report(results))
