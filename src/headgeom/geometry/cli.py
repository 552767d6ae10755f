"""``headgeom hessian``: spectra of H_eff, G and M for a head, an objective and a state, printed
(and written with ``--json FILE``). The parser is :func:`headgeom.commands.hessian.add_hessian`
(torch-free); it names :func:`run`.

The setting is synthetic and stated in the output: z ~ N(0, I) (N, d); a second view
z₂ = z + σ ε (σ = ``view_noise``) gives the other view's head output (or the stop-gradient
target) held fixed, so L(u) = analysis_loss(objective, h(z₂)); the Hessian is taken with
respect to the first view's z. ``pseudo-collapsed`` scales every Linear weight of the head
by 0.1, the paper's pseudo-collapsed initialisation (docs/paper.md §3). The head's initialisation,
z and the second view come from ``seed`` alone, and the caller's global random stream is left as it
was: the head is built under :func:`torch.random.fork_rng`, z is drawn from a local generator.
"""
from __future__ import annotations

import argparse
from typing import Any

import torch

from headgeom.heads import head_from, scale_linear_weights_
from headgeom.io import atomic_write_json
from headgeom.objectives import analysis_loss

from .engine.effective_hessian import effective_hessian
from .linalg.spectrum import spectrum

__all__ = ["run", "hessian_report", "format_report"]

STATES = ("random", "pseudo-collapsed")
SCOPES = ("blocks", "dense", "operator")
PSEUDO_COLLAPSE_SCALE = 0.1


def run(args: argparse.Namespace) -> int:
    """Compute the report of ``args`` (see :func:`hessian_report`), print it, write ``--json``; returns 0."""
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    report = hessian_report(
        args.head, args.objective, batch=args.batch_size, state=args.state, reading=args.reading,
        seed=args.seed, scope=args.scope, mode=args.mode, dtype=dtype,
    )
    print(format_report(report))
    if args.json:
        atomic_write_json(args.json, report)
        print(f"\nwrote {args.json}")
    return 0


def hessian_report(
    head: str,
    objective: str,
    *,
    batch: int = 32,
    state: str = "random",
    reading: str = "ambient",
    seed: int = 0,
    scope: str = "blocks",
    mode: str = "eval",
    view_noise: float = 0.1,
    dtype: torch.dtype = torch.float64,
) -> dict[str, Any]:
    """Spectra of H_eff, G and M; a JSON-ready dict (see the module docstring for the setting)."""
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}; got {state!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}; got {scope!r}")
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train'; got {mode!r}")
    if batch < 1:
        raise ValueError(f"batch must be at least 1; got {batch}")
    with torch.random.fork_rng(devices=[]):  # the head's initialisation from ``seed``, the caller's stream untouched
        torch.manual_seed(seed)
        model = head_from(head).to(dtype)
    if state == "pseudo-collapsed":
        scale_linear_weights_(model, PSEUDO_COLLAPSE_SCALE)
    model.train(mode == "train")
    d = model.spec.in_dim
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(batch, d, generator=g, dtype=dtype)
    z2 = z + view_noise * torch.randn(batch, d, generator=g, dtype=dtype)
    with torch.no_grad():
        other = model(z2)
    loss = analysis_loss(objective, other)
    eh = effective_hessian(model, loss, z, reading=reading, dtype=dtype)
    engine, operand, rho_norm = eh.info(), eh.operand_scale().record(), float(eh.rho.norm())
    # H_eff and G: floor relative to G's operands too (headgeom.geometry.engine.operand_scale); M has no cancellation
    s = operand["value"]
    if scope == "blocks":
        h, gn, m = eh.decomposed_blocks()
    elif scope == "dense":
        h, gn, m = eh.dense(), eh.gauss_newton(), eh.interaction()
    else:
        h, gn, m = (eh.operator(p) for p in "HGM")
    if scope != "operator":
        del eh  # its analysis copy, chain products and work buffers: the spectra of matrices need none of them
    spectra = {"H_eff": spectrum(h, decomposition={"G": gn, "M": m}, scale=s), "G": spectrum(gn, scale=s),
               "M": spectrum(m)}
    return {
        "setting": {
            "head": model.spec.to_string(), "objective": objective, "batch": batch, "state": state,
            "reading": reading, "seed": seed, "scope": scope, "mode": mode, "view_noise": view_noise,
            "z": "N(0, I); other view z + view_noise * N(0, I), its head output held fixed",
        },
        "engine": engine,
        "operand_scale": operand,
        "rho_norm": rho_norm,
        "spectra": {name: s.to_dict() for name, s in spectra.items()},
        "summary": {name: s.summary() for name, s in spectra.items()},
    }


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def format_report(report: dict[str, Any]) -> str:
    """A readable table of the spectra (what ``headgeom hessian`` prints)."""
    s, e = report["setting"], report["engine"]
    lines = [
        f"H_eff = G + M  head {s['head']}  objective {s['objective']}  N={s['batch']}  state {s['state']}  "
        f"mode {s['mode']}  seed {s['seed']}",
        f"reading: {s['reading']} ({e['reading_definition']});  dtype {e['dtype']};  scope {s['scope']} "
        f"({e['block_path']});  |rho| = {report['rho_norm']:.4g}",
        f"reduction: {e['reduction']}",
        "",
    ]
    cols = ["lambda_min", "lambda_max", "n_negative", "n_zero", "n_positive", "condition_number"]
    header = f"{'':6}" + "".join(f"{c:>18}" for c in cols)
    lines.append(header)
    for name, summ in report["summary"].items():
        lines.append(f"{name:6}" + "".join(f"{_fmt(summ.get(c)):>18}" for c in cols))
    h = report["summary"]["H_eff"]
    if "M_ratio_fro" in h:
        lines.append("")
        lines.append(f"|M| / |H_eff|: Frobenius {_fmt(h['M_ratio_fro'])}, spectral {_fmt(h['M_ratio_spectral'])};  "
                     f"|G| / |H_eff|: Frobenius {_fmt(h.get('G_ratio_fro'))}")
    per = report["spectra"]["H_eff"].get("per_sample")
    if per:
        lines.append("")
        lines.append("per-sample H_eff blocks (min / median / max over samples):")
        for key in ("lambda_min", "lambda_max", "n_negative", "condition_number"):
            if key in per:
                p = per[key]
                lines.append(f"  {key:18} {_fmt(p.get('min'))} / {_fmt(p.get('median'))} / {_fmt(p.get('max'))}")
    lines.append(f"negative means lambda < -floor, floor = {report['spectra']['H_eff']['rel_floor']:g} * "
                 f"max(max|lambda|, S) for H_eff and G (S = {report['operand_scale']['value']:.4g}, the scale of G's "
                 f"operands, max_i |A_i| |J_i|^2), {report['spectra']['M']['rel_floor']:g} * max|lambda| for M; "
                 f"condition number: {report['spectra']['H_eff']['condition_definition']}")
    return "\n".join(lines)
