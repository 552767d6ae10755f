"""C10 summary: claims, tables and notes from the per-checkpoint orbit ratios (the paper's §6.3; docs/paper.md#c10).

The verdict rule (stated in every claim; :mod:`headgeom.claims.orbit_direction`): for each checkpoint ×
family, the ratio z / h(z) of the chosen metric *compresses* when its bootstrap CI lies above 1 and
*expands* when it lies below 1. A method's claim is supported when every pair of its checkpoints ×
families goes the stated way (DINO: compress; VICReg, Barlow Twins: expand), not supported when any
pair goes the opposite way, and inconclusive otherwise or when a checkpoint file is missing. The
dichotomy is supported when all three method claims are, not supported when any is not.

The claims use ``selectivity`` (= the L2 trace ratio / the global ratio) with the head fed raw z
(:data:`DECIDED_BY` says why); a second dichotomy entry uses the paper's per-dimension ratio. The
raw trace ratio (the earlier decider, dimension-fair) and every other metric are in the
verdict-by-metric table; the paper's per-dimension ratio is the raw trace ratio times D_h / D_z,
and a note says whether that factor alone flips a verdict. Rows carry no out-of-distribution
flag (they read the head fed raw z, the trained map); the tables show the mean pairwise cosine at
the head for both inputs and mark z/‖z‖ in as out of distribution. Computation lives in
the experiment (headgeom.experiments.c10_pretrained); this module only reads the cells' metrics.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: the orbit ratios of the
official checkpoints could come out either way; the dichotomy rows combine the method rows. Every row names
its conventions (:data:`CONVENTIONS`) and is re-judged over the metric, the head input and the families from
the stored estimates (:func:`method_robustness`); the CI level is named and not swept (it needs the bootstrap
replicates, which the cells do not keep). Without a checkpoint every re-judgement is inconclusive too.
"""
from __future__ import annotations

import re

from pathlib import Path
from typing import Any

from headgeom.checkpoints.pretrained_files import (EXPECTED_FILES, checkpoints_dir, file_cell, placement_message,
                                                   placement_table)
from headgeom.claims.estimates import measured as measured_entry
from headgeom.claims.evidence import TEST
from headgeom.claims.orbit_direction import OPPOSITE, dichotomy_verdict, direction, direction_verdict
from headgeom.claims.robustness import Robustness, robustness_text, sweep
from headgeom.claims.row import Row
from headgeom.claims.verdict import Verdict
from headgeom.experiments.registry import Summary
from headgeom.io import json_number
from headgeom.report.plots import c10_pretrained as plots
from headgeom.report.table import Table

__all__ = ["CONVENTIONS", "DECIDED_BY", "METHODS", "METRICS", "PRIMARY", "PAPER_METRIC", "STATEMENT", "TRACE",
           "method_robustness", "method_verdict", "summarize"]

STATEMENT = ("§6.3: DINO heads compress augmentation orbits (orbit variance falls through the head), "
             "VICReg and Barlow Twins heads expand them")
METHODS = {"dino": ("DINO", "compress"), "vicreg": ("VICReg", "expand"), "barlow_twins": ("Barlow Twins", "expand")}
METRICS = {
    "trace_ratio_raw": "tr Σ_z / tr Σ_h of raw features (dimension-fair)",
    "per_dim_ratio_raw": "(tr Σ_z / D_z) / (tr Σ_h / D_h) of raw features (the paper's per-dimension ratio)",
    "trace_ratio": "tr Σ_z / tr Σ_h of L2-normalised features (C9's compression)",
    "per_dim_ratio": "per-dimension ratio of L2-normalised features",
    "selectivity": "trace_ratio / global_ratio: orbit spread relative to the whole cloud, z over h(z), each in its "
                   "own space (> 1: orbits shrink more than the cloud)",
    "compression_centred": "trace ratio of features centred on the mean of all orbit points before normalising",
}
PRIMARY = ("selectivity", "raw")  # what the claims decide on
TRACE = ("trace_ratio_raw", "raw")  # the dimension-fair ratio the paper's per-dimension ratio is compared with
PAPER_METRIC = ("per_dim_ratio_raw", "raw")
DECIDED_BY = ("decided by selectivity (trace_ratio / global_ratio), not by the paper's per-dimension ratio or the raw "
              "trace ratio (both in the tables with their CIs): raw-feature ratios compare variances in two spaces of "
              "different scales (and per-dimension ones also carry D_h / D_z), and the L2 trace ratio counts global "
              "shrinkage of the whole cloud and reads a BN-centred h against a non-centred z as expansion; "
              "selectivity compares each orbit with the cloud it lives in, in its own space")
HEADLINE_RELEASE = {"dino": "dino_vit", "vicreg": "vicreg", "barlow_twins": "barlow_twins"}
CONVENTIONS = ("metric", "head_input", "family", "level")
"""The settings a C10 verdict depends on: the ratio it reads, the head's input, the families that must all go the
stated way, and the CI level. The first three are re-judged from the stored estimates; the level is not (the cells
keep each CI at one level, not the bootstrap replicates, so another level means measuring the checkpoints again)."""
LEVEL_NOT_SWEPT = ("The CI level is a convention too, not swept: the cells keep each interval at one level, not the "
                   "bootstrap replicates, so another level means measuring the checkpoints again")
# docs/paper.md#c10, rotation orbits: the paper's per-dimension ratio and an independent trace-ratio reproduction
PAPER_PER_DIM = {"dino_vit": 1284.0, "dino_resnet50": 176.0, "vicreg": 1.43, "barlow_twins": 2.63}
REPRO_TRACE = {"dino_vit": 7.7, "dino_resnet50": 3.8, "vicreg": 0.25, "barlow_twins": 0.45}


def _f(x: Any) -> float:
    """A JSON number back to float (headgeom.io.json_number: null -> nan, "inf"/"-inf" -> ±inf)."""
    return json_number(x)


def _split(config: Any, results: list[tuple[dict, dict]]) -> tuple[dict[str, dict], list[str], str | None]:
    """(measured metrics by release, releases without a measurement, the checkpoint directory)."""
    measured = {m["release"]: m for _, m in results if m.get("status") == "measured"}
    dirs = [c.get("dir") for c, _ in results if c.get("dir")]
    directory = dirs[0] if dirs else (None if (d := checkpoints_dir(config.checkpoints_dir)) is None else str(d))
    missing = [r for r in EXPECTED_FILES if r not in measured]
    return measured, missing, directory


def _unmeasured(missing: list[str], directory: str | None) -> dict[str, str]:
    """Setting entries for checkpoints without a measurement: ``missing_files`` (absent files: what
    to place where) and ``not_measured`` (present files whose cell failed or was not run)."""
    folder = None if directory is None else Path(directory)
    absent = [r for r in missing if not file_cell(r, folder)["present"]]
    out = {}
    if absent:
        out["missing_files"] = placement_message(absent, directory, urls=False)
    broken = [r for r in missing if r not in absent]
    if broken:
        names = ", ".join(f"{EXPECTED_FILES[r].label} `{EXPECTED_FILES[r].filename}`" for r in broken)
        out["not_measured"] = ("present but not measured (the cell failed, see Failed cells, or the release is not "
                               f"in config.releases): {names}")
    return out


def method_verdict(method: str, metric: str, head_input: str, measured: dict[str, dict],
                   families: tuple[str, ...]) -> tuple[Verdict, list[tuple[str, str, str, dict]], list[str]]:
    """(verdict, [(release, family, direction, estimate)], releases of the method not measured): the rule of
    :func:`headgeom.claims.orbit_direction.direction_verdict` (its headline names the pair that decided, as
    ``metric[release/family]``), inconclusive while a checkpoint of the method is missing."""
    releases = [r for r, e in EXPECTED_FILES.items() if e.method == method]
    missing = [r for r in releases if r not in measured]
    if missing:
        return direction_verdict({}, METHODS[method][1], complete=False), [], missing
    pairs = []
    for r in releases:
        for fam in families:
            est = measured[r]["families"][fam]["ratios"][head_input][metric]
            pairs.append((r, fam, direction(est), est))
    lead = next((f"{metric}[{r}/{fam}]" for r, fam, _, _ in pairs if r == HEADLINE_RELEASE[method]), None)
    verdict = direction_verdict({f"{metric}[{r}/{fam}]": d for r, fam, d, _ in pairs}, METHODS[method][1], lead)
    return verdict, pairs, []


def _inputs(config: Any) -> list[str]:
    return [v for v in ("raw", "l2") if v in config.head_inputs]


def method_robustness(config: Any, method: str, measured: dict, metric: str = PRIMARY[0],
                      head_input: str = PRIMARY[1], swept: tuple[str, ...] = ("metric", "head_input", "family")
                      ) -> dict[str, Robustness]:
    """A method's verdict re-judged over each convention of ``swept``: every metric of :data:`METRICS`, every head
    input measured, all families ("all") and each family alone; the others as the row reads them."""
    families = tuple(config.families)

    def verdict(m: str = metric, v: str = head_input, fams: tuple[str, ...] = families):
        return method_verdict(method, m, v, measured, fams)[0]

    return _sweeps(verdict, metric, head_input, families, swept, _inputs(config))


def _sweeps(rule, metric: str, head_input: str, families: tuple[str, ...], swept: tuple[str, ...],
            inputs: list[str]) -> dict[str, Robustness]:
    """``rule(m, v, fams)`` over the metrics, head inputs and family choices of ``swept`` (module docstring)."""
    each = {"all": families, **{f: (f,) for f in families}}
    out = {"metric": sweep(lambda m: rule(m=m), metric, list(METRICS)),
           "head_input": sweep(lambda v: rule(v=v), head_input, inputs),
           "family": sweep(lambda f: rule(fams=each[f]), "all", list(each))}
    return {k: out[k] for k in swept}


def _dichotomy_robustness(config: Any, measured: dict, missing: list[str], metric: str, head_input: str,
                          swept: tuple[str, ...]) -> dict[str, Robustness]:
    """The dichotomy re-judged as :func:`method_robustness` re-judges a method."""
    def rule(m: str = metric, v: str = head_input, fams: tuple[str, ...] = tuple(config.families)):
        return dichotomy_verdict({k: method_verdict(k, m, v, measured, fams)[0].outcome for k in METHODS},
                                 complete=not missing)

    return _sweeps(rule, metric, head_input, tuple(config.families), swept, _inputs(config))


def _ci_measured(est: dict[str, Any], n: int) -> dict[str, Any]:
    lo, hi = (_f(c) for c in est["ci"])
    return {"value": _f(est["value"]), "n": n, "spread": None, "ci": [lo, hi],
            "spread_kind": f"{est.get('level', 0.95):.0%} CI [{lo:.4g}, {hi:.4g}], bootstrap over images"}


def _criterion(metric: str, head_input: str, level: float, what: str) -> str:
    return (f"per checkpoint x family, 'compress' if the {level:.0%} bootstrap CI of {metric} ({METRICS[metric]}; "
            f"z over h(z), head fed {head_input} z) lies above 1, 'expand' if it lies below 1; {what}; "
            "inconclusive otherwise, or when a checkpoint file is missing (setting missing_files says what to place "
            "where; download addresses in the C10 checkpoint-file table)")


def headline_words(key: str, method: str = "") -> str:
    """The headline of a C10 row in words, by the measured key that decided it (headgeom.claims.orbit_direction):
    a (checkpoint / family) pair's selectivity, or a count over checkpoints or methods."""
    pair = re.fullmatch(r"(?P<metric>[^\[]+)\[(?P<release>[^/]+)/(?P<family>[^\]]+)\]", key)
    if pair:
        label = EXPECTED_FILES[pair["release"]].label if pair["release"] in EXPECTED_FILES else pair["release"]
        return (f"orbit {pair['metric']} of z over the head's output, {label}, {pair['family']} orbits (above 1: "
                "the head compresses them)")
    return {"checkpoints_measured": f"share of the {method + ' ' if method else ''}checkpoint files measured "
                                    "(a missing one leaves the claim undecided)",
            "methods_supported": "share of the three methods whose own claim is supported",
            "methods_not_supported": "share of the three methods whose own claim is not supported"}.get(key, key)


def _method_claim(config: Any, method: str, measured: dict, directory: str | None) -> tuple[Row, str]:
    name, want = METHODS[method]
    metric, head_input = PRIMARY
    verdict, pairs, missing = method_verdict(method, metric, head_input, measured, tuple(config.families))
    meas = {f"{metric}[{r}/{fam}]": _ci_measured(est, measured[r]["n_images"]) for r, fam, _, est in pairs}
    beside = {}  # the paper's per-dimension ratio and the raw trace ratio, each with its own CI
    for r, fam, _, _ in pairs:
        ratios = measured[r]["families"][fam]["ratios"][head_input]
        beside[f"{TRACE[0]}[{r}/{fam}]"] = _ci_measured(ratios[TRACE[0]], measured[r]["n_images"])
        if fam == "rotation_45":
            beside[f"{PAPER_METRIC[0]}[{r}/{fam}] (paper's)"] = _ci_measured(ratios[PAPER_METRIC[0]],
                                                                           measured[r]["n_images"])
    meas.update(beside)
    setting = {"method": name, "checkpoints": ", ".join(EXPECTED_FILES[r].label for r in EXPECTED_FILES
                                                        if EXPECTED_FILES[r].method == method),
               "metric": metric, "head_input": f"{head_input} z (the trained map)",
               "families": ", ".join(config.families), "images": _images_text(config)}
    if method == "dino":
        setting["which"] = f"DINO {config.which}"
    setting.update(_unmeasured(missing, directory))
    what = (f"supported if every {name} checkpoint x family is '{want}', not supported if any is '{OPPOSITE[want]}'")
    robust = method_robustness(config, method, measured)
    if not pairs:  # a checkpoint was not measured: that decided
        releases = [r for r, e in EXPECTED_FILES.items() if e.method == method]
        meas["checkpoints_measured"] = measured_entry([float(r in measured) for r in releases],
                                                      what=f"1 if the {name} checkpoint was measured")
    claim = Row(id="C10", statement=f"§6.3: {name} heads {want} augmentation orbits "
                + ("(orbit variance falls through the head)" if want == "compress"
                   else "(orbit variance grows through the head)"),
                setting=setting, measured=meas, verdict=verdict.outcome, evidence=TEST, headline=verdict.headline,
                headline_text=headline_words(verdict.headline, name),
                conventions=CONVENTIONS, robustness=robust,
                criterion=DECIDED_BY + ". " + _criterion(metric, head_input, config.level, what)
                + f". Re-judged: {robustness_text(robust)}. {LEVEL_NOT_SWEPT}")
    return claim, verdict.outcome


def _images_text(config: Any) -> str:
    return (f"{config.n_classes * config.per_class} {config.data} {config.split} images ({config.n_classes} classes x "
            f"{config.per_class}) at {config.image_size} px, {config.steps} steps")


def _dichotomy(config: Any, verdicts: dict[str, str], metric: str, head_input: str, missing: list[str],
               directory: str | None, measured: dict) -> Row:
    verdict = dichotomy_verdict(verdicts, complete=not missing)  # the dichotomy is about all four checkpoints
    setting = {"metric": metric, "head_input": f"{head_input} z", "families": ", ".join(config.families),
               "images": _images_text(config)}
    setting.update(_unmeasured(missing, directory))
    what = "the dichotomy is supported if the DINO, VICReg and Barlow Twins claims under this metric all are, " \
           "not supported if any is not"
    # the primary dichotomy is swept over the metric too; the paper-metric one exists to show that metric
    swept = ("metric", "head_input", "family") if (metric, head_input) == PRIMARY else ("head_input", "family")
    robust = _dichotomy_robustness(config, measured, missing, metric, head_input, swept)
    meas: dict[str, Any] = {
        "methods_supported": measured_entry([float(v == "supported") for v in verdicts.values()],
                                            what="1 if the method's claim under this metric is supported"),
        "methods_not_supported": measured_entry([float(v == "not supported") for v in verdicts.values()],
                                                what="1 if the method's claim under this metric is not supported"),
        **{f"verdict[{METHODS[m][0]}]": v for m, v in verdicts.items()}}
    return Row(id="C10", statement=STATEMENT, setting=setting, measured=meas, verdict=verdict.outcome,
               headline=verdict.headline, evidence=TEST, headline_text=headline_words(verdict.headline),
               conventions=tuple(c for c in CONVENTIONS if c in swept or c == "level"), robustness=robust,
               criterion=(DECIDED_BY + ". " if (metric, head_input) == PRIMARY else "")
               + _criterion(metric, head_input, config.level, what)
               + f". Re-judged: {robustness_text(robust)}. {LEVEL_NOT_SWEPT}")


def _fmt(est: dict | None) -> str:
    if not est:
        return "-"
    lo, hi = (_f(c) for c in est["ci"])
    return f"{_f(est['value']):.3g} [{lo:.3g}, {hi:.3g}]"


def _ratio_table(config: Any, measured: dict) -> Table:
    inputs = [v for v in ("raw", "l2") if v in config.head_inputs]
    cols = ["checkpoint", "family", "D_z", "D_h", "D_h/D_z"]
    for v in inputs:
        cols += [f"per-dim raw ({v} in)", f"trace raw ({v} in)", f"dir ({v} in)"]
    cols += ["selectivity (raw in, decides)", "global ratio (raw in)", "trace L2 (raw in)", "centred trace L2 (raw in)"]
    cols += [f"mean pairwise cosine h ({v} in{', out of distribution' if v == 'l2' else ''})" for v in inputs]
    cols += ["class/orbit z → h (raw in), change [CI]", "fresh head trace raw", "paper per-dim / repro trace"]
    table = Table(cols, title=f"C10 orbit variance ratios z / h(z) at the head output (value [{config.level:.0%} CI])")
    for r in EXPECTED_FILES:
        if r not in measured:
            continue
        for fam, fr in measured[r]["families"].items():
            row = [EXPECTED_FILES[r].label, fam, str(fr["dim_z"]), str(fr["dim_head"]),
                   f"{fr['dim_head'] / fr['dim_z']:.4g}"]
            for v in inputs:
                rat = fr["ratios"][v]
                row += [_fmt(rat["per_dim_ratio_raw"]), _fmt(rat["trace_ratio_raw"]), direction(rat["trace_ratio_raw"])]
            co = fr["class_orbit_ratio"]
            row += [_fmt(fr["ratios"]["raw"].get(k)) for k in ("selectivity", "global_ratio", "trace_ratio",
                                                                "compression_centred")]
            row += [_fmt((fr.get("mean_pairwise_cosine_h") or {}).get(v)) for v in inputs]
            row += [
                    f"{_f((co.get('z') or {}).get('value')):.3g} → {_f((co.get('raw') or {}).get('value')):.3g}, "
                    f"x {_fmt(fr['ratios']['raw'].get('class_orbit_change'))}",
                    _fmt((fr.get("controls") or {}).get("fresh_head", {}).get("raw", {}).get("trace_ratio_raw")),
                    f"{PAPER_PER_DIM[r]:g} / {REPRO_TRACE[r]:g}" if fam == "rotation_45" else "-"]
            table.add(*row)
    return table


def _profile_table(config: Any, measured: dict) -> Table:
    """trace_ratio_raw (z over each point) after every head layer, head fed raw z, per family."""
    table = Table(("checkpoint", "family", "z / point, raw trace (point, layer, D)"),
                  title="C10 where the change happens: raw trace ratio z / point after each head layer")
    for r in EXPECTED_FILES:
        if r not in measured:
            continue
        for fam, fr in measured[r]["families"].items():
            pts = "; ".join(f"{p} {v.get('module', '')} (D={v['dim']}): {_f(v['trace_ratio_raw']):.3g}"
                            for p, v in fr["by_point"].items() if not p.startswith("l2z/"))
            table.add(EXPECTED_FILES[r].label, fam, pts)
    return table


def _verdict_table(config: Any, measured: dict) -> tuple[Table, dict[tuple[str, str], dict[str, str]]]:
    inputs = [v for v in ("raw", "l2") if v in config.head_inputs]
    combos = [(m, v) for v in inputs for m in METRICS]
    table = {c: {meth: method_verdict(meth, c[0], c[1], measured, tuple(config.families))[0].outcome
                 for meth in METHODS}
             for c in combos}
    out = Table(["method (stated)", *(f"{m} ({v} in)" for m, v in combos)],
                title=f"C10 verdict each metric would give (the claims use {PRIMARY[0]}, {PRIMARY[1]} in)")
    for meth, (name, want) in METHODS.items():
        out.add(f"{name} ({want})", *(table[c][meth] for c in combos))
    return out, table


def _notes(config: Any, measured: dict, missing: list[str], directory: str | None,
           table: dict[tuple[str, str], dict[str, str]]) -> list[str]:
    notes = []
    extra = _unmeasured(missing, directory)
    if "missing_files" in extra:
        folder = None if directory is None else Path(directory)
        notes.append(placement_message([r for r in missing if not file_cell(r, folder)["present"]], directory))
    if "not_measured" in extra:
        notes.append("Checkpoint files " + extra["not_measured"] + ".")
    native = sorted({tuple(m["images"]["native_size"]) for m in measured.values() if "images" in m})
    side = " / ".join(f"{h}x{w}-px" for h, w in native) if native else "32x32-px CIFAR-10"
    notes.append(f"Protocol: {_images_text(config)}; {side} images resized to {config.image_size} px (bilinear) "
                 "before "
                 "the augmentation, colour operations on [0, 1] pixels, then ImageNet mean/std (docs/paper.md §4 "
                 "pitfall 6). "
                 f"DINO: the {config.which}. Ratios are z over the head output h(z): > 1 means the orbit variance "
                 "falls through the head. CIs: BCa bootstrap over images, stratified by class.")
    notes.append("per_dim_ratio = trace_ratio x D_h / D_z exactly (D_z, D_h: backbone and head-output dimensions), "
                 "so the paper's per-dimension ratio inflates a head wider than the backbone by D_h / D_z "
                 "(docs/paper.md §4 pitfall 4).")
    for r, m in measured.items():
        fr = next(iter(m["families"].values()))
        notes.append(f"{EXPECTED_FILES[r].label}: D_z = {fr['dim_z']}, D_h = {fr['dim_head']}, D_h / D_z = "
                     f"{fr['dim_head'] / fr['dim_z']:.4g}; head {m.get('head')}; sha256 {m.get('sha256')} "
                     f"({(m.get('sha256_check') or {}).get('status', '?')}); missing keys "
                     f"{len(m.get('missing_keys', []))}, unexpected keys {len(m.get('unexpected_keys', []))}; "
                     f"{m.get('seconds', 0):.1f} s.")
    primary, trace, paper = table.get(PRIMARY), table.get(TRACE), table.get(PAPER_METRIC)
    judged = [k for k in METHODS if all(r in measured for r, e in EXPECTED_FILES.items() if e.method == k)]
    if trace and paper and judged:
        flips = [f"{METHODS[k][0]}: {paper[k]} under the paper's per-dimension ratio, {trace[k]} under the "
                 "trace ratio" for k in judged if paper[k] != trace[k]]
        names = ", ".join(METHODS[k][0] for k in judged)
        notes.append(f"Of the methods measured ({names}), the dimension factor flips "
                     + ("; ".join(flips) if flips else "no verdict") + ".")
    if primary and trace and judged:
        moved = [f"{METHODS[k][0]}: {primary[k]} under selectivity (the claims), {trace[k]} under the raw trace "
                 "ratio" for k in judged if primary[k] != trace[k]]
        notes.append("Verdicts: " + DECIDED_BY + ". Against the raw trace ratio, selectivity changes "
                     + ("; ".join(moved) if moved else "no verdict") + ".")
    if measured and "l2" in config.head_inputs:
        notes.append("Out of distribution: the columns '(l2 in)' feed z/|z| to heads trained on raw z (the paper's "
                     "protocol, docs/paper.md §4 pitfall 5); their BN running statistics and first layer see inputs at "
                     "another scale. The mean pairwise cosine at the head is in the ratio table (near 1: every input "
                     "maps near one direction); the claims read the raw input.")
    return notes


def summarize(config: Any, results: list[tuple[dict, dict]]) -> Summary:
    """Claims per method (selectivity), the dichotomy under selectivity and the paper's per-dim ratio,
    the file table, the ratio table, the verdict-by-metric table and notes."""
    measured, missing, directory = _split(config, results)
    claims, verdicts = [], {}
    for method in METHODS:
        claim, verdicts[method] = _method_claim(config, method, measured, directory)
        claims.append(claim)
    claims.append(_dichotomy(config, verdicts, *PRIMARY, missing, directory, measured))
    paper_verdicts = {m: method_verdict(m, *PAPER_METRIC, measured, tuple(config.families))[0].outcome for m in METHODS}
    claims.append(_dichotomy(config, paper_verdicts, *PAPER_METRIC, missing, directory, measured))
    files = [file_cell(r, None if directory is None else Path(directory)) for r in EXPECTED_FILES]
    tables = [Table.from_markdown(placement_table(files), title="C10 official checkpoint files")]
    verdict_table, table = _verdict_table(config, measured)
    if measured:
        tables += [_ratio_table(config, measured), verdict_table]
        if all("by_point" in fr for m in measured.values() for fr in m["families"].values()):
            tables.append(_profile_table(config, measured))
    checkpoints = [(EXPECTED_FILES[r].label, measured[r]) for r in EXPECTED_FILES if r in measured]
    figures = [("ratios", lambda: plots.ratios(checkpoints, config.families))] if measured else []
    notes = _notes(config, measured, missing, directory, table)
    return Summary(claims=claims, tables=tables, figures=figures, notes=notes)
