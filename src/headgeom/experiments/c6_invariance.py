"""C6, Prop 5.2 (invariance ⇒ singular pullback metric): Rayleigh quotients on augmentation tangents.

System (:mod:`headgeom.theory.invariance`; its size per preset, regimes and cells, shared with C7:
:mod:`headgeom.theory.invariance_system`): band-limited periodic patterns x(θ) = T_ξ b(c) on an
S×S grid, the exact torus group of circular translations T_ξ (dim V_aug = 2), an MLP backbone f
and a ProjectionHead h trained with VICReg on two random shifts of each pattern. Two regimes:
``joint`` (f and h trained) and ``head_only`` (f frozen at its random init, h trained).

For each cell (regime × seed), before and after training, on n_eval fresh manifold points, in
float64:

- tangents: z-space v = ∂f(T_ξ x)/∂ξ and pixel-space t = ∂T_ξ x/∂ξ, one per group generator, by jvp;
- controls: random unit directions (of R^d for the head, of the pixel space for the backbone) and
  ``content`` directions (random unit directions of the manifold's content tangent space
  ∂x/∂c, pushed through f for the head): the same smoothness class as the tangents;
- quotients vᵀAv/‖v‖² for A = G = J_hᵀJ_h (``head_G``, by jvp), A = J_hᵀ ∇²_u L J_h with the VICReg
  loss of one view, the other view fixed, ambient reading (``head_GL``, per-sample diagonal
  blocks of the engine's G), and A = J_fᵀJ_f in pixel space (``backbone_G``);
- contrasts (:func:`headgeom.geometry.invariance.tangents.quotient_contrast`, on |q|): ratio = median|q_tangent|
  / median|q_control| and p_below = P(|q_t| < |q_c|);
- the premise: the invariance gap of h∘f and of f (orbit spread / data spread, 0 = invariant).

Measured runtime of ``headgeom reproduce --only C6,C7 --preset quick``: 50-72 s wall (17-20 s
CPU) on 2 CPU cores under load 9-10 from other jobs (C6 36-52 s, C7 4-6 s); details in :func:`quick`.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: the tangent quotients of a
trained head could come out either way; Prop 5.2's premise (an invariant h∘f) is measured beside
(the invariance gap), not judged in a row of its own. Exact invariance would fix the outcome (the chain
rule gives J_h v = 0 on V_aug); the premise here is approximate (an orbit spread of h∘f within
``premise_max`` of the data spread) and the ratio compares tangents with controls point by point, so it
is not fixed. Each row names its conventions (premise_max, ratio_max, ratio_none, majority and, for the
Prop 5.2 rows, the control) and is re-judged over each from the stored per-seed gaps and ratios.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import jvp

from headgeom.claims.invariance_verdict import degeneracy_verdict, lowpass_verdict
from headgeom.claims.robustness import Robustness, robustness_text, sweep, with_own
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.geometry import effective_hessian
from headgeom.geometry.invariance.tangents import (
    JacobianMetric,
    augmentation_tangent,
    quotient_contrast,
    random_unit_directions,
    rayleigh_quotients,
)
from headgeom.launch.resources import Resources
from headgeom.objectives import analysis_loss
from headgeom.claims.estimates import format_estimate
from headgeom.claims.evidence import TEST
from headgeom.report.plots import c6_invariance as plots
from headgeom.report.table import Table
from headgeom.theory.invariance import (
    GROUPS,
    STAGES,
    InvarianceSpec,
    PatternManifold,
    invariance_gap,
    shift_family,
)
from headgeom.theory.invariance_system import (REGIME_FIELDS, REGIMES, cell_system, preset_system, regime_cells,
                                               regime_spec)

STATEMENT = ("Prop 5.2: invariance to continuous augmentations forces vᵀG v = 0 on V_aug "
             "(the head is a geometric low-pass filter)")
METRICS = ("head_G", "head_GL", "backbone_G")
CONTROLS = ("random", "content")
METRIC_NAMES = {"head_G": "G = J_hᵀJ_h (head, z-space)", "head_GL": "J_hᵀ∇²_u L J_h (head, VICReg, ambient)",
                "backbone_G": "J_fᵀJ_f (backbone, pixel space)"}


@dataclass(frozen=True)
class C6Config:
    """Every setting of C6 (see the module docstring)."""

    preset: str = "quick"
    system: InvarianceSpec = field(default_factory=InvarianceSpec)
    regimes: tuple[str, ...] = REGIMES
    seeds: int = 3
    n_eval: int = 48  # manifold points analysed per cell
    n_control: int = 8  # control directions per point and kind
    premise_max: float = 0.1  # premise: gap of h∘f ≤ this (invariant) and gap of f > this (f is not)
    ratio_max: float = 0.1  # median|q_tangent| / median|q_control| ≤ this: degenerate on V_aug
    ratio_none: float = 0.5  # ratio ≥ this: not degenerate (at most 2× suppression); in between: partial
    majority: float = 0.8  # fraction of seeds a verdict needs
    # the ranges the verdicts are re-judged over (each row's robustness; each setting's own value is added)
    premise_max_sweep: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3)
    ratio_max_sweep: tuple[float, ...] = (0.05, 0.1, 0.2)
    ratio_none_sweep: tuple[float, ...] = (0.3, 0.5, 0.7)
    majority_sweep: tuple[float, ...] = (0.5, 0.6, 0.8, 1.0)
    control: str = "random"  # the control of the Prop 5.2 rows' ratio: "random" or "content" (both measured)
    num_threads: int | None = 1


def quick() -> C6Config:
    """12×12 patterns, 6 bumps, f 144-64-16, h 16-32-16 (SiLU), VICReg 300 steps; 2 regimes × 3 seeds.

    Command: ``headgeom reproduce --only C6 --preset quick`` (with C7: ``--only C6,C7``, which
    shares the trained systems). Runtime: C6 + C7 together 50-72 s wall, 17-20 s CPU
    time (two runs; C6 36-52 s, C7 4-6 s reusing C6's trained systems, the rest start-up and report),
    on 2 CPU cores shared with other jobs (load average 9-10); per cell about 2 s training + 2.5 s analysis.
    No GPU used.
    Measures Rayleigh quotients of G, J_hᵀ∇²L J_h and the backbone metric on augmentation
    tangents against random and content directions, before and after invariance training.
    """
    return C6Config(preset="quick", system=preset_system("quick"))


def small() -> C6Config:
    """16×16 patterns, 8 bumps, f 256-128-32, h 32-64-32, 600 steps; 2 regimes × 5 seeds, 96 points.

    Command: ``headgeom reproduce --only C6 --preset small``. Runtime: C6 + C7 together 4.2 min wall, 68 s
    CPU time, on 2 CPU cores under load ~10 from other jobs (C6 176 s, C7 60 s).
    Measures the same quantities with more seeds and points.
    """
    return C6Config(preset="small", system=preset_system("small"), seeds=5, n_eval=96)


def paper() -> C6Config:
    """24×24 patterns, 12 bumps, f 576-256-64, h 64-256-64, 2000 steps; 2 regimes × 10 seeds, 128 points.

    Command: ``headgeom reproduce --only C6 --preset paper``. Runtime: not measured
    (estimated 30-60 min for C6 + C7 on 2 CPU cores).
    The paper has no such controlled experiment; this preset only scales the quick one up.
    """
    return C6Config(preset="paper", system=preset_system("paper"), seeds=10, n_eval=128, n_control=16,
                    num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; 30-60 min for the 40 cells of C6 + C7 on 2 cores (estimated, not measured)
RESOURCES = {"paper": Resources(cpus=2, mem_gb=4, time_min=30, expected_min=1.5)}


def cells(config: C6Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per regime × seed (before and after training are measured in the same cell)."""
    if config.control not in CONTROLS:
        raise ValueError(f"C6 control {config.control!r} is not one of {CONTROLS}")
    return regime_cells("C6", config.regimes, config.seeds if seeds is None else seeds)


def _jvp_each(fn, x: torch.Tensor, dirs: torch.Tensor) -> torch.Tensor:
    """fn's Jacobian at x applied to dirs (N, m, *x.shape[1:]) -> (N, m, out)."""
    return torch.stack([jvp(fn, (x,), (dirs[:, j],))[1] for j in range(dirs.shape[1])], dim=1)


def measure(backbone, head, manifold: PatternManifold, theta: torch.Tensor, xi_other: torch.Tensor,
            objective: str, n_control: int, generator: torch.Generator) -> dict[str, dict[str, torch.Tensor]]:
    """Quotients {metric: {"tangent", "random", "content": tensor}} at the points θ (float64 models)."""
    x = manifold.render(theta)
    n, p = theta.shape[0], manifold.spec.n_content
    axes = GROUPS[manifold.spec.group]
    with torch.no_grad():
        z = backbone(x)
        u_other = head(backbone(manifold.act(x, xi_other)))
    pix_t = torch.stack([augmentation_tangent(lambda im: im, x, shift_family(a)) for a in axes], 1)
    z_t = torch.stack([augmentation_tangent(backbone, x, shift_family(a)) for a in axes], 1)
    # content directions: ∂x/∂c · w = T_ξ b(w) (x is linear in c), w uniform on the unit sphere of R^p
    w = random_unit_directions((n, n_control, p), generator)
    xi = theta[:, p:].repeat_interleave(n_control, 0)
    pix_c = manifold.act(manifold.base(w.reshape(n * n_control, p)), xi).reshape(n, n_control, *x.shape[1:])
    z_c = _jvp_each(backbone, x, pix_c)
    z_r = random_unit_directions((n, n_control, z.shape[1]), generator)
    pix_r = random_unit_directions((n, n_control, *x.shape[1:]), generator, sample_dims=x.ndim - 1)
    g_head = JacobianMetric(head, z)
    blocks = effective_hessian(head, analysis_loss(objective, u_other), z, reading="ambient").gauss_newton_blocks()
    g_back = JacobianMetric(backbone, x)
    out = {}
    for name, metric, (t, r, c) in (("head_G", g_head, (z_t, z_r, z_c)), ("head_GL", blocks, (z_t, z_r, z_c)),
                                     ("backbone_G", g_back, (pix_t, pix_r, pix_c))):
        out[name] = {"tangent": rayleigh_quotients(metric, t).detach(), "random": rayleigh_quotients(metric, r).detach(),
                     "content": rayleigh_quotients(metric, c).detach()}
    out["_norms"] = {"z_tangent": z_t.norm(dim=-1).detach(), "pixel_tangent": pix_t.flatten(2).norm(dim=-1)}
    return out


def run_cell(config: C6Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Contrasts, gaps and the quotient distributions of one regime × seed, before and after."""
    regime, seed = cell["regime"], int(cell["seed"])
    spec, system, manifold = cell_system(config.system, cell)
    out: dict[str, Any] = {"regime": regime, "dim_aug": spec.dim_aug, "n_eval": config.n_eval,
                           "loss_first": system.loss_first, "loss_last": system.loss_last, "quotients": {}}
    for stage in STAGES:
        backbone, head = (copy.deepcopy(m).double().eval() for m in system.models[stage])
        g = torch.Generator().manual_seed(424_242 + seed)  # the same points and controls before and after
        theta = manifold.sample(config.n_eval, g)
        xi_other = torch.rand(config.n_eval, spec.dim_aug, generator=g, dtype=torch.float64)
        q = measure(backbone, head, manifold, theta, xi_other, spec.objective, config.n_control, g)
        out[f"{stage}.gap_end_to_end"] = invariance_gap(backbone, head, manifold, theta, g)
        out[f"{stage}.gap_backbone"] = invariance_gap(backbone, None, manifold, theta, g)
        out[f"{stage}.z_tangent_norm_median"] = float(q["_norms"]["z_tangent"].median())
        for name in METRICS:
            for ctrl in CONTROLS:
                c = quotient_contrast(q[name]["tangent"], q[name][ctrl])
                out[f"{stage}.{name}.ratio_{ctrl}"] = c["ratio"]
                out[f"{stage}.{name}.p_below_{ctrl}"] = c["p_below"]
            out[f"{stage}.{name}.median_tangent"] = float(q[name]["tangent"].abs().median())
            out["quotients"][f"{stage}.{name}"] = {k: [float(f"{v:.4g}") for v in q[name][k].flatten().tolist()]
                                                   for k in ("tangent", "random", "content")}
    return out


# ---------------------------------------------------------------- summary (apart from computing)
def _by_regime(results: list[tuple[dict, dict]]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for cell, m in results:
        groups.setdefault(cell["regime"], []).append(m)
    return groups


HEAD_CONVENTIONS = ("premise_max", "ratio_max", "ratio_none", "majority", "control")
"""The settings the Prop 5.2 rows' verdicts depend on, each re-judged over its config range."""
LOWPASS_CONVENTIONS = ("ratio_max", "ratio_none", "majority")
"""The settings the low-pass rows' verdicts depend on."""


def _sweeps(config: C6Config, names: tuple[str, ...], rule) -> dict[str, Robustness]:
    """``rule(**{name: value})`` over each convention's range (``<name>_sweep``, or both controls), own value added."""
    values = {n: (CONTROLS if n == "control" else with_own(getattr(config, n), getattr(config, f"{n}_sweep")))
              for n in names}
    return {n: sweep(lambda v, n=n: rule(**{n: v}), getattr(config, n), values[n]) for n in names}


def head_verdict(config: C6Config, ms: list[dict], metric: str, **change: Any):
    """The Prop 5.2 verdict of ``metric`` with the conventions of ``change`` in place of the config's: a pure
    function of the per-seed gaps and ratios stored after training."""
    cfg = dataclasses.replace(config, **change)
    premise = [m["after.gap_end_to_end"] <= cfg.premise_max < m["after.gap_backbone"] for m in ms]
    ratio = [m[f"after.{metric}.ratio_{cfg.control}"] for m in ms]
    return degeneracy_verdict(premise, ratio, ratio_max=cfg.ratio_max, ratio_none=cfg.ratio_none,
                              majority=cfg.majority)


HEADLINE_WORDS = {
    "seeds_premise_met": "share of seeds where training made h∘f invariant while f still moves along the orbits "
                         "(the premise of Prop 5.2)",
    "seeds_premise_and_degenerate": "share of seeds meeting the premise whose head metric is degenerate on the "
                                    "augmentation tangents",
    "seeds_premise_and_not_degenerate": "share of seeds meeting the premise whose head metric is at most "
                                        "{suppression:g}× suppressed on the augmentation tangents",
    "seeds_head_degenerate_backbone_not": "share of seeds where the head, not the backbone, is degenerate on the "
                                          "augmentation tangents",
    "seeds_backbone_degenerate": "share of seeds where the backbone itself is degenerate on the augmentation "
                                 "tangents",
    "seeds_head_not_degenerate": "share of seeds where the head is at most {suppression:g}× suppressed on the "
                                 "augmentation tangents",
}
"""The headline of a C6 row in words, by the measured key that decided it (headgeom.claims.invariance_verdict);
``{suppression}`` is 1 / the config's ratio_none (:func:`headline_words`)."""


def headline_words(config: C6Config, key: str) -> str | None:
    """The words of headline ``key`` at ``config``'s ratio_none; None for a key without words."""
    words = HEADLINE_WORDS.get(key)
    return words.format(suppression=1 / config.ratio_none) if words else None


def _head_claim(config: C6Config, regime: str, ms: list[dict], metric: str) -> Row:
    premise = [m["after.gap_end_to_end"] <= config.premise_max < m["after.gap_backbone"] for m in ms]
    ratio = [m[f"after.{metric}.ratio_{config.control}"] for m in ms]
    maj = config.majority
    verdict, headline, _ = head_verdict(config, ms, metric)
    robust = _sweeps(config, HEAD_CONVENTIONS, lambda **c: head_verdict(config, ms, metric, **c))
    criterion = (f"per seed, premise: invariance gap of h∘f after training <= {config.premise_max:g} while the gap of f "
                 f"stays > {config.premise_max:g} (f still moves along the orbits, so V_aug is not ~0 in z-space); "
                 f"ratio = median|q_tangent| / median|q_{config.control}| of {metric} after training. Supported if "
                 f">= {maj:.0%} of seeds meet the premise with ratio <= {config.ratio_max:g} (degenerate); not supported "
                 f"if >= {maj:.0%} meet the premise with ratio >= {config.ratio_none:g} (at most "
                 f"{1 / config.ratio_none:g}x suppression); "
                 "inconclusive otherwise: partial suppression in between, training short of the premise (which Prop 5.2 "
                 "assumes), or a backbone that became invariant itself. A test, not an identity: exact invariance "
                 "would force ratio 0 (the chain rule), but the premise bounds a finite orbit spread of h∘f against the "
                 "data spread, while the ratio compares the head's metric on tangents with control directions at each "
                 f"point, so approximate invariance leaves it open. Re-judged: {robustness_text(robust)}")
    # the fractions of seeds the criterion compares with the majority (the headline is the one that decided)
    meas = {"seeds_premise_met": measured([float(p) for p in premise], what="1 if the seed meets the premise"),
            "seeds_premise_and_degenerate": measured(
                [float(p and r <= config.ratio_max) for p, r in zip(premise, ratio)],
                what=f"1 if the seed meets the premise with ratio <= {config.ratio_max:g}"),
            "seeds_premise_and_not_degenerate": measured(
                [float(p and r >= config.ratio_none) for p, r in zip(premise, ratio)],
                what=f"1 if the seed meets the premise with ratio >= {config.ratio_none:g}"),
            "gap_end_to_end_after": measured([m["after.gap_end_to_end"] for m in ms]),
            "gap_backbone_after": measured([m["after.gap_backbone"] for m in ms])}
    for stage in STAGES:
        for ctrl in CONTROLS:
            meas[f"ratio_{ctrl}_{stage}"] = measured([m[f"{stage}.{metric}.ratio_{ctrl}"] for m in ms])
        meas[f"p_below_random_{stage}"] = measured([m[f"{stage}.{metric}.p_below_random"] for m in ms])
    return _claim(config, regime, metric, meas, verdict, criterion, headline).replace(
        conventions=HEAD_CONVENTIONS, robustness=robust)


def lowpass_flags(config: C6Config, ms: list[dict], **change: Any) -> tuple[list[bool], list[bool], list[bool]]:
    """Per seed (head degenerate and backbone not, backbone degenerate, head at most 2× suppressed) on the content
    control, with the conventions of ``change`` in place of the config's."""
    cfg = dataclasses.replace(config, **change)
    head = [m["after.head_G.ratio_content"] <= cfg.ratio_max for m in ms]
    back = [m["after.backbone_G.ratio_content"] <= cfg.ratio_max for m in ms]
    return ([h and not b for h, b in zip(head, back)], back,
            [m["after.head_G.ratio_content"] >= cfg.ratio_none for m in ms])


def _lowpass_claim(config: C6Config, regime: str, ms: list[dict]) -> Row:
    head_only, back, head_none = lowpass_flags(config, ms)
    maj = config.majority
    verdict, headline, _ = lowpass_verdict(head_only, back, head_none, majority=maj)
    robust = _sweeps(config, LOWPASS_CONVENTIONS, lambda **c: lowpass_verdict(
        *lowpass_flags(config, ms, **c), majority=c.get("majority", maj)))
    criterion = (f"content control (tangents against random directions of the data manifold's content tangent space, "
                 f"the same smoothness class): supported if in >= {maj:.0%} of seeds the head's G is degenerate on "
                 f"V_aug after training (ratio <= {config.ratio_max:g}) while the backbone's J_fᵀJ_f is not (ratio > "
                 f"{config.ratio_max:g}); not supported if the backbone is degenerate in >= {maj:.0%} of seeds (the "
                 f"invariance is already in f) or the head's ratio is >= {config.ratio_none:g} (at most "
                 f"{1 / config.ratio_none:g}x suppression) "
                 f"in >= {maj:.0%}; inconclusive otherwise. Re-judged: {robustness_text(robust)}")
    # the fractions of seeds the criterion compares with the majority (the headline is the one that decided)
    meas = {"seeds_head_degenerate_backbone_not": measured(
                [float(f) for f in head_only], what=f"1 if the head's ratio is <= {config.ratio_max:g} and the "
                                                    "backbone's is not"),
            "seeds_backbone_degenerate": measured([float(b) for b in back],
                                                  what=f"1 if the backbone's ratio is <= {config.ratio_max:g}"),
            "seeds_head_not_degenerate": measured([float(h) for h in head_none],
                                                  what=f"1 if the head's ratio is >= {config.ratio_none:g}")}
    meas.update({f"{name}_ratio_content_{stage}": measured([m[f"{stage}.{name}.ratio_content"] for m in ms])
                 for name in ("head_G", "backbone_G") for stage in STAGES})
    meas["gap_backbone_after"] = measured([m["after.gap_backbone"] for m in ms])
    claim = _claim(config, regime, "head_G vs backbone_G", meas, verdict, criterion, headline)
    return claim.replace(statement=STATEMENT + " — read as: the head, not the backbone, carries the degeneracy on V_aug",
                         conventions=LOWPASS_CONVENTIONS, robustness=robust)


def _claim(config: C6Config, regime: str, metric: str, meas: dict, verdict: str, criterion: str,
           headline: str) -> Row:
    s = regime_spec(config.system, regime)
    return Row(
        id="C6", statement=STATEMENT,
        setting={"objective": s.objective, "head": f"{s.d}-{s.head_hidden}-{s.k}:{s.activation}",
                    "reading": "ambient" if metric == "head_GL" else "identity (G = J^T J)", "preset": config.preset,
                    "regime": regime, "metric": metric, "group": f"{s.group} (dim V_aug = {s.dim_aug})",
                    "backbone": f"MLP {s.size ** 2}-{s.hidden}-{s.d}:{s.activation}", "n_eval": config.n_eval},
        measured=meas, verdict=verdict, evidence=TEST, criterion=criterion, headline=headline,
        headline_text=headline_words(config, headline),
    )


def _pm(vals: list[float]) -> str:
    return format_estimate(measured(vals))


def _table(config: C6Config, groups: dict[str, list[dict]]) -> Table:
    table = Table(("regime", "stage", "metric", "ratio vs random", "P(below random)", "ratio vs content", "gap h∘f",
                   "gap f", "n"),
                  title="C6: median Rayleigh-quotient ratios, tangents / controls, on |q| (mean ± std over seeds)")
    for regime in config.regimes:
        ms = groups.get(regime, [])
        for stage in STAGES if ms else ():
            for name in METRICS:
                table.add(regime, stage, name, _pm([m[f"{stage}.{name}.ratio_random"] for m in ms]),
                          _pm([m[f"{stage}.{name}.p_below_random"] for m in ms]),
                          _pm([m[f"{stage}.{name}.ratio_content"] for m in ms]),
                          _pm([m[f"{stage}.gap_end_to_end"] for m in ms]), _pm([m[f"{stage}.gap_backbone"] for m in ms]),
                          len(ms))
    return table


def summarize(config: C6Config, results: list[tuple[dict, dict]]) -> Summary:
    """Per regime: a Prop 5.2 claim for G and for J_hᵀ∇²L J_h, a low-pass claim (head vs backbone), a table, figures."""
    groups = _by_regime(results)
    regimes = [r for r in config.regimes if r in groups]
    claims = []
    for r in regimes:
        claims += [_head_claim(config, r, groups[r], "head_G"), _head_claim(config, r, groups[r], "head_GL"),
                   _lowpass_claim(config, r, groups[r])]
    tables = [_table(config, groups)]
    figures = [(f"quotients_{r}", (lambda r=r: plots.quotient_histograms(
        [m["quotients"] for m in groups[r]], r, {name: METRIC_NAMES[name] for name in METRICS}, STAGES)))
        for r in regimes]
    notes = ["ratio = median|vᵀAv/‖v‖²| over tangents / the same over controls; 1: tangents look like the control, "
             "→ 0: the metric is degenerate on V_aug. J_hᵀ∇²L J_h uses the VICReg loss of one view with the other "
             "view fixed (ambient reading, per-sample diagonal blocks, batch mean so blocks carry 1/N).",
             "controls: random = uniform unit directions of R^d (head) or of pixel space (backbone; white noise, much "
             "rougher than the smooth tangents); content = unit directions of the manifold's content tangent space.",
             "gap = orbit spread / data spread of the feature map (0 = exactly invariant)."]
    for r in regimes:
        ms = groups[r]
        loss0, loss1 = _pm([m["loss_first"] for m in ms]), _pm([m["loss_last"] for m in ms])
        tangent = _pm([m["after.z_tangent_norm_median"] for m in ms])
        notes.append(f"{r}: VICReg loss {loss0} at step 0 -> {loss1} at the last step; "
                     f"median ‖∂f/∂ξ‖ after training {tangent}.")
    return Summary(claims=claims, tables=tables, figures=figures, notes=notes)


EXPERIMENT = register(Experiment(
    id="C6",
    title="Invariance makes the head's pullback metric singular on augmentation tangents (Prop 5.2)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
    cell_keys={f"system.{name}": instead for name, instead in REGIME_FIELDS.items()},
))
