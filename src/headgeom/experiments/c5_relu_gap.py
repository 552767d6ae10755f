"""C5, the ReLU gap: gradient flow vs gradient descent near collapse, ± BatchNorm, per head.

System (headgeom.theory.dynamics): free representations r (N, d) (or a linear backbone on fixed
random inputs), two fixed near-identity linear augmentations as views, the paper's projector
template Linear(no bias) → [BN, train mode] → act → Linear(no bias) and a predictor of the same
template, SimSiam's symmetric negative cosine with stop-gradient. Start near collapse: r_i = c +
ε g_i. Gradient flow dθ/dt = −g(θ) by scipy solve_ivp against GD at each lr for round(T/lr)
steps (the same horizon in time units).

Measured per run: spread(t) = mean over dimensions of the per-dimension std (over the N
samples, ddof=1) of the L2-normalised view-1 backbone outputs z1 ("backbone") and projector
outputs u1 ("projector"); escape time = first recorded t with spread(t) ≥ escape_factor ·
spread(0) on ``escape_on`` (None if never, to the record-grid resolution T/n_record);
final/initial spread. Along the flow, the head geometry (H_eff = G + M of z1 ↦ p1 under
L = −½cos(p1, sg(u2)), ambient reading, dense float64): ‖M‖_F/‖H_eff‖_F, max|M|, dead head.
BN heads are escape-checked on the backbone by default because train-mode BN rescales the tiny
deviations of a collapsed batch to unit variance, inflating the projector spread from t = 0.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: M = 0 for a ReLU head is a
fact, but whether the simulated flow and GD runs escape collapse is an outcome of the dynamics: it
could come out either way.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from headgeom.claims.relu_gap import SMOOTH_ESCAPES, relu_gap_verdict, smooth_key
from headgeom.claims.robustness import sweep_grid
from headgeom.claims.training_verdicts import MAJORITIES
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.launch.resources import Resources
from headgeom.claims.estimates import mean_std_text
from headgeom.claims.evidence import TEST
from headgeom.claims.verdict import Verdict
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.plots import c5_relu_gap as plots
from headgeom.report.table import Table
from headgeom.runs.cell import seeded_cells
from headgeom.theory import dynamics as dyn

SMOOTH = ("silu", "gelu")
M_ZERO_TOL = 1e-10  # ReLU's max |M|_F/|H_eff|_F along the flow at or below this is M = 0
ESCAPE_FACTORS = (1.25, 1.5, 2.0, 3.0, 5.0)  # the escape factors swept (re-judged on the stored spread series)
SMOOTH_ESCAPES_SWEPT = (0.25, 0.5, 0.75, 1.0)
M_ZERO_TOLS = (1e-12, 1e-10, 1e-8, 1e-6)
CONVENTIONS = ("escape_factor", "support_fraction", "smooth_escapes", "m_zero_tol")


@dataclass(frozen=True)
class C5Config:
    preset: str = "quick"
    seeds: int = 3
    heads: tuple[str, ...] = ("linear", "relu", "silu", "gelu")
    bn: tuple[bool, ...] = (False, True)
    lrs: tuple[float, ...] = (0.005, 0.05, 0.5)
    horizon: float = 2.0  # T, in time units of the flow (GD: round(T/lr) steps)
    n_record: int = 40  # record grid 0, T/n_record, ..., T
    method: str = "DOP853"  # solve_ivp method (train-mode BN gives fast modes: many small steps)
    rtol: float = 1e-8
    atol: float = 1e-10
    max_nfev: int | None = 15000  # per flow; a flow stopped by it reports success False and counts as undecided
    escape_factor: float = 2.0
    escape_on: str = "backbone"  # or "projector"
    geometry_fractions: tuple[float, ...] = (0.0, 0.5, 1.0)  # of T, along the flow
    support_fraction: float = 0.8
    system: dyn.SystemSpec = dyn.SystemSpec(n=8, d=3, width=16, k=8, pred_width=8, init_spread=0.1)


def quick() -> C5Config:
    """`headgeom reproduce --only C5 --preset quick`: ~1-2 min on 2 CPU cores (24 cells, N=8, d=3,
    widths 16/8, ε=0.1, T=2, DOP853 rtol 1e-8). Measures escape of the backbone spread under flow vs GD."""
    return C5Config()


def small() -> C5Config:
    """`--preset small`: ~10-20 min on 2 CPU cores; T=10, rtol 1e-10 / atol 1e-12, N=16, d=4, widths 32/16."""
    return C5Config(preset="small", horizon=10.0, n_record=100, rtol=1e-10, atol=1e-12, max_nfev=None,
                    system=dyn.SystemSpec(n=16, d=4, width=32, k=16, pred_width=16, init_spread=0.1))


def paper() -> C5Config:
    """`--preset paper`: hours on CPU (minutes per cell on a GPU host's CPU); 5 seeds, T=50,
    rtol 1e-10 / atol 1e-12, N=32, d=8, widths 64/16, linear backbone on random inputs."""
    return C5Config(preset="paper", seeds=5, horizon=50.0, n_record=200, rtol=1e-10, atol=1e-12, max_nfev=None,
                    system=dyn.SystemSpec(backbone="linear", n=32, d_in=16, d=8, width=64, k=32,
                                          pred_width=16, init_spread=0.1))


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; minutes per cell (estimated, not measured)
RESOURCES = {"paper": Resources(cpus=2, mem_gb=4, time_min=120, expected_min=10)}


def cells(config: C5Config, seeds: int | None = None) -> list[dict]:
    """One cell per head × BN × seed."""
    return seeded_cells("C5", [{"head": h, "bn": b} for h in config.heads for b in config.bn], seeds,
                        default=config.seeds)


def _run_record(system: dyn.System, traj: dyn.Trajectory, config: C5Config) -> dict:
    obs = [dyn.observables(system, th) for th in traj.theta]
    out = {"t": traj.t.tolist(), "nfev": traj.nfev, "success": traj.success, "message": traj.message,
           "diverged": traj.diverged}
    for key in ("loss", "spread_backbone", "spread_projector"):
        out[key] = [o[key] for o in obs]
    s = np.asarray(out[f"spread_{config.escape_on}"], dtype=np.float64)
    out["escape_time"] = dyn.escape_time(traj.t, s, config.escape_factor)
    last = s[np.isfinite(s)][-1] if np.isfinite(s).any() else np.nan
    out["final_over_initial"] = float(last / s[0]) if s[0] > 0 else float("nan")
    return out


def run_cell(config: C5Config, cell: dict) -> dict:
    """One head × BN × seed: the flow and GD at every lr. Keys: head, bn, seed, escape_on,
    escape_factor, runs {"flow", "gd_lr=<lr>": {t, loss, spread_backbone, spread_projector,
    escape_time, final_over_initial, nfev, success, message, diverged}}, geometry [{t, max_abs_M,
    M_over_H, max_abs_H, lambda_min_H, dead, active_fraction, min_abs_preactivation, ...}]."""
    if config.escape_on not in ("backbone", "projector"):
        raise ValueError(f"escape_on must be 'backbone' or 'projector'; got {config.escape_on!r}")
    spec = replace(config.system, activation=cell["head"], bn=bool(cell["bn"]))
    system = dyn.build_system(spec, int(cell["seed"]))
    grad = dyn.numpy_gradient(system)
    t_rec = np.linspace(0.0, config.horizon, config.n_record + 1)
    flow = dyn.integrate_flow(grad, system.theta0, t_rec, method=config.method, rtol=config.rtol, atol=config.atol,
                                max_nfev=config.max_nfev)
    runs = {"flow": _run_record(system, flow, config)}
    for lr in config.lrs:
        gd = dyn.gradient_descent(grad, system.theta0, lr, config.horizon, t_rec)
        runs[f"gd_lr={lr:g}"] = _run_record(system, gd, config)
    geometry = []
    for frac in config.geometry_fractions:
        j = int(round(frac * config.n_record))
        if np.all(np.isfinite(flow.theta[j])):
            geometry.append({"t": float(flow.t[j]), **dyn.head_geometry(system, flow.theta[j])})
    return {"head": cell["head"], "bn": bool(cell["bn"]), "seed": int(cell["seed"]), "escape_on": config.escape_on,
            "escape_factor": config.escape_factor, "num_params": system.num_params, "runs": runs,
            "geometry": geometry}


# ----------------------------------------------------------------------------- summary
def _select(results, head: str, bn: bool) -> list[dict]:
    return [m for c, m in results if m["head"] == head and m["bn"] == bn]


def _escaped(run: dict, factor: float | None = None) -> bool:
    """Whether the run escaped: its stored escape time, or, at another ``factor``, the one its stored spread series
    gives (:func:`headgeom.theory.dynamics.escape_time` on the record grid)."""
    if run["diverged"]:
        return False
    if factor is None:
        return run["escape_time"] is not None
    return dyn.escape_time(np.asarray(run["t"]), np.asarray([_num(x) for x in run["spread_escape"]]),
                           factor) is not None


def _fmt(xs: list[float]) -> str:
    return mean_std_text([_num(x) for x in xs], empty="–")


def _num(x) -> float:
    """A float from a metric that may have come back from JSON (NaN is written as null)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


def _max_m_ratio(metrics: dict) -> float:
    vals = [_num(g["M_over_H"]) for g in metrics["geometry"] if np.isfinite(_num(g["M_over_H"]))]
    return max(vals) if vals else float("nan")


def _verdict(config: C5Config, results, *, escape_factor: float | None = None, support_fraction: float | None = None,
             smooth_escapes: float = SMOOTH_ESCAPES, m_zero_tol: float = M_ZERO_TOL) -> tuple[str, dict, str, str]:
    """(verdict, measured, criterion, headline): headline is the measured key whose value decided the verdict
    (the first condition of the criterion that failed, or the ReLU flow's alive-and-stuck fraction when all hold).
    The conventions default to the config's (escape_factor None: the cells' own escape times)."""
    factor = None if escape_factor in (None, config.escape_factor) else escape_factor
    support = config.support_fraction if support_fraction is None else support_fraction
    escaped = lambda run: _escaped(_with_series(run, config), factor)  # noqa: E731
    relu = _select(results, "relu", False)
    relu_bn = _select(results, "relu", True)
    dead = [any(g["dead"] for g in m["geometry"][:1]) for m in relu]
    flow_esc = [escaped(m["runs"]["flow"]) for m in relu]
    complete = [bool(m["runs"]["flow"]["success"]) for m in relu]  # a budget-stopped flow decides nothing
    stuck = [not e and not d and c for e, d, c in zip(flow_esc, dead, complete)]
    other = any(escaped(r) for m in relu for k, r in m["runs"].items() if k != "flow") or \
        any(escaped(r) for m in relu_bn for r in m["runs"].values())
    smooth = {h: [escaped(m["runs"]["flow"]) for m in _select(results, h, False)] for h in SMOOTH}
    smooth_frac = {h: (sum(v) / len(v) if v else float("nan")) for h, v in smooth.items()}
    relu_m = [_max_m_ratio(m) for m in relu]
    m_zero = bool(relu_m) and all(np.isfinite(x) and x <= m_zero_tol for x in relu_m)
    meas = {
        "relu_flow_escape_fraction": measured([float(e) for e in flow_esc] or [float("nan")], unit="fraction of seeds"),
        "relu_flow_alive_and_not_escaped_fraction": measured([float(k) for k in stuck] or [float("nan")]),
        "relu_dead_at_start_fraction": measured([float(d) for d in dead] or [float("nan")]),
        "relu_flow_complete_fraction": measured([float(c) for c in complete] or [float("nan")],
                                                meaning="flow reached T within max_nfev"),
        "relu_max_M_over_H_along_flow": measured(relu_m or [float("nan")], reading="ambient", norm="Frobenius"),
        "relu_other_route_escaped": measured(float(other), meaning="1 if ReLU escaped under some GD lr or with BN"),
    }
    for h, v in smooth.items():
        if v:
            meas[f"{h}_flow_escape_fraction"] = measured([float(e) for e in v])
    for m in relu:
        for k, r in m["runs"].items():
            if k != "flow":
                meas.setdefault(f"relu_{k}_escape", []).append(float(escaped(r)))
    for k in [k for k in meas if k.startswith("relu_gd_")]:
        meas[k] = measured(meas[k])
    criterion = (f"escape = {config.escape_on} spread ≥ {escape_factor or config.escape_factor}× its t=0 value within "
                 f"T={config.horizon}. supported if ReLU (no BN) M/H ≤ {m_zero_tol:g} along the flow, its flow reaches T, "
                 f"neither escapes nor is dead in ≥ {support:.0%} of seeds, ReLU escapes under some GD lr or with BN, "
                 f"and a smooth head (silu/gelu, no BN) escapes under the flow in ≥ {smooth_escapes:.0%} of seeds; not "
                 f"supported if ReLU (no BN) escapes under the flow in > 50% of seeds or its M is not zero; "
                 f"inconclusive otherwise")
    if not any(np.isfinite(f) for f in smooth_frac.values()):  # the smooth condition has nothing to read
        meas[smooth_key(smooth_frac)] = measured([], meaning="no smooth head (silu/gelu, no BN) was run")
    verdict = relu_gap_verdict(flow_esc, stuck, other, m_zero, smooth_frac, support, smooth_escapes)
    return verdict.outcome, meas, criterion, verdict.headline


def _with_series(run: dict, config: C5Config) -> dict:
    """The run with ``spread_escape``, the spread series escape is read on (``config.escape_on``)."""
    return {**run, "spread_escape": run.get(f"spread_{config.escape_on}") or []}


def _robustness(config: C5Config, results) -> dict:
    """The verdict over a stated range of each convention, re-judged from the stored series (free)."""
    def rule(**kw):
        outcome, _, _, headline = _verdict(config, results, **kw)
        return Verdict(outcome, headline)
    return {"escape_factor": sweep_grid(lambda v: rule(escape_factor=v), config.escape_factor, ESCAPE_FACTORS),
            "support_fraction": sweep_grid(lambda v: rule(support_fraction=v), config.support_fraction, MAJORITIES),
            "smooth_escapes": sweep_grid(lambda v: rule(smooth_escapes=v), SMOOTH_ESCAPES, SMOOTH_ESCAPES_SWEPT),
            "m_zero_tol": sweep_grid(lambda v: rule(m_zero_tol=v), M_ZERO_TOL, M_ZERO_TOLS)}


def _tables(config: C5Config, results) -> list[Table]:
    kinds = ["flow"] + [f"gd_lr={lr:g}" for lr in config.lrs]
    n = config.seeds
    esc = Table(["head", "BN", *kinds], title=(f"C5 escapes (escaped seeds/n, escape time mean ± std; {config.escape_on} "
                                               f"spread ≥ {config.escape_factor}× initial within T={config.horizon}; "
                                               f"n={n} seeds)"))
    ratio = Table(["head", "BN", *kinds], title=f"C5 final/initial {config.escape_on} spread (mean ± std over n={n} seeds)")
    geo = Table(("head", "BN", "max ‖M‖/‖H_eff‖ along flow", "dead at t=0", "active fraction t=0", "λ_min(H_eff) t=0"),
                title="C5 head geometry along the flow (z1 ↦ p1, L = −½cos(p1, sg u2), ambient reading, dense float64)")
    for h in config.heads:
        for b in config.bn:
            ms = _select(results, h, b)
            if not ms:
                continue
            e_cells, r_cells = [], []
            for k in kinds:
                runs = [m["runs"][k] for m in ms]
                times = [r["escape_time"] for r in runs if _escaped(r)]
                div = sum(r["diverged"] for r in runs)
                cut = sum(not r["success"] and not r["diverged"] for r in runs)
                e_cells.append(f"{len(times)}/{len(runs)}" + (f", t {_fmt(times)}" if times else "")
                               + (f", {div} diverged" if div else "") + (f", {cut} stopped early" if cut else ""))
                r_cells.append(_fmt([r["final_over_initial"] for r in runs]))
            esc.add(h, b, *e_cells)
            ratio.add(h, b, *r_cells)
            g0 = [m["geometry"][0] for m in ms if m["geometry"]]
            geo.add(h, b, _fmt([_max_m_ratio(m) for m in ms]), f"{sum(g['dead'] for g in g0)}/{len(g0)}",
                    _fmt([g["active_fraction"] for g in g0]), _fmt([g["lambda_min_H"] for g in g0]))
    return [esc, ratio, geo]


def _by_head(config: C5Config, results) -> dict[str, dict[bool, list[dict]]]:
    """The cells' metrics per head with results (config order), then per BN setting."""
    heads = [h for h in config.heads if any(m["head"] == h for _, m in results)]
    return {h: {b: _select(results, h, b) for b in config.bn} for h in heads}


def summarize(config: C5Config, results) -> Summary:
    verdict, meas, criterion, headline = _verdict(config, results)
    s = config.system
    claim = Row(
        id="C5", statement=EXPERIMENT.statement,
        setting={"objective": "simsiam (symmetric negative cosine, stop-gradient)",
                    "head": f"{s.d}-{s.width}-{s.k} Linear(no bias)→[BN]→act→Linear(no bias), predictor "
                            f"{s.k}-{s.pred_width}-{s.k}", "reading": "ambient (geometry only)",
                    "preset": config.preset, "backbone": s.backbone, "N": s.n, "init": s.init,
                    "init_spread": s.init_spread, "views": f"two fixed linear augmentations I + {s.aug_strength}·R/√D",
                    "flow": f"solve_ivp {config.method} rtol={config.rtol} atol={config.atol}", "horizon": config.horizon,
                    "lrs": list(config.lrs)},
        measured=meas, verdict=verdict, evidence=TEST, criterion=criterion + (
            f". Robustness: re-judged from the stored spread series and geometry at escape_factor {list(ESCAPE_FACTORS)}, "
            f"support_fraction {list(MAJORITIES)}, smooth_escapes {list(SMOOTH_ESCAPES_SWEPT)}, m_zero_tol "
            f"{list(M_ZERO_TOLS)}; the initial spread (system.init_spread) and the horizon need new runs: not swept"),
        headline=headline, conventions=CONVENTIONS, robustness=_robustness(config, results),
        headline_text={"relu_flow_alive_and_not_escaped_fraction": "share of ReLU seeds whose gradient flow stays "
                       "collapsed (alive, complete)", "relu_flow_escape_fraction": "share of ReLU seeds whose gradient "
                       "flow escapes collapse"}.get(headline),
    )
    notes = ["spread = mean over dimensions of the per-dimension std (ddof=1, over N samples) of L2-normalised "
             "view-1 outputs; escape is read on the record grid (resolution T/n_record).",
             "With stop-gradient the field is not a gradient of the loss, so the loss need not fall monotonically "
             "along the flow; a diverged GD run (non-finite state) does not count as an escape."]
    return Summary(claims=[claim], tables=_tables(config, results),
                   figures=[("spread_vs_time", lambda: plots.spread_vs_time(
                       _by_head(config, results), ["flow"] + [f"gd_lr={lr:g}" for lr in config.lrs], config.escape_on,
                       config.seeds))], notes=notes)


# docs/paper.md §2 C5: "gradient flow vs GD at lr 0.005/0.05/0.5, ± BN"
PAPER_PROTOCOL = PaperProtocol({"lrs": (0.005, 0.05, 0.5), "bn": (False, True)})

EXPERIMENT = register(Experiment(
    id="C5", title="ReLU gap: gradient flow vs finite-step GD near collapse, ± BatchNorm",
    statement="ReLU heads have M = 0, so they escape collapse only through finite step size and BatchNorm, "
              "not under gradient flow",
    presets={"quick": quick, "small": small, "paper": paper}, cells=cells, run_cell=run_cell,
    summarize=summarize, theory=True,
    resources=RESOURCES,
    protocol=PAPER_PROTOCOL,
    cell_keys={"system.activation": "each cell sets its head's activation: set heads instead, e.g. --set 'heads=[\"relu\"]'",
               "system.bn": "each cell sets BatchNorm on or off: set bn instead, e.g. --set 'bn=[true]'"},
))
