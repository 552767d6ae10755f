"""C4's cells: the exact spectra of H_eff = G + M at each state (the package docstring says which).

One cell is activation × state × reading × seed. :func:`run_cell` dispatches on the state; every state's point is
read by :func:`measure_point` (spectra of H_eff, G and M from float64 eigh, the residual ‖∇_z L‖, the state's
threshold ratio and, for small problems, the dense cross-check).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import torch

from headgeom.augment import get_recipe
from headgeom.backbones import get_backbone
from headgeom.data.cifar_jpeg import cifar10_test_images, locate_cifar10, missing_message
from headgeom.geometry import effective_hessian, spectrum
from headgeom.heads import HeadSpec, ProjectionHead, scale_linear_weights_
from headgeom.theory.collapse import (CollapsedPoint, collapsed_equilibrium, equilibrium_residual,
                                      pseudo_collapsed_point, two_view_point)
from headgeom.theory.collapse_threshold import (A_SINGULAR, ENGINE_READING, MAGNITUDE_OF_READING,
                                                OBJECTIVE_OF_READING, log_grid, state_ratio, threshold_sweep)
from headgeom.theory.view_gap import gap_sweep, view_angles

from .config import EQUILIBRIUM_STATES, MEASURED, READINGS, STATES, SYNTHETIC, C4Config

__all__ = ["CIFAR_KEYS", "METRIC_KEYS", "SWEEP_KEYS", "build_head", "data_cell", "measure_point", "run_cell"]

METRIC_KEYS = (
    "objective", "N", "d", "k", "hidden", "weight_scale", "null_dim", "equilibrium",
    "grad_z_norm", "grad_z_rel", "rho_norm", "jac_norm", "rho_design_error", "u_norm_mean", "kink_distance",
    "floor", "operand_scale", "lambda_min_H", "lambda_max_H", "n_negative_H", "n_zero_H",
    "lambda_min_G", "lambda_max_G", "n_negative_G", "lambda_min_M", "lambda_max_M", "n_negative_M",
    "M_fro", "M_ratio_fro", "G_ratio_fro", "lambda_min_rel_H",
    "dense", "dense_lambda_min_H", "dense_n_negative_H", "dense_block_gap", "dense_offblock_max",
    "magnitude", "point_magnitude", "sweep_grid", "sweep_lambda_min", "sweep_floor", "threshold", "threshold_status",
    "threshold_rel_tol", "threshold_sweep", "threshold_sweep_status", "threshold_ratio",
    "crossing_margin", "crossing_lambda_min_below", "crossing_lambda_min_above", "crossing_negative_below",
    "crossing_negative_above", "crossing_ok",
)
"""The keys of one measured point (every equilibrium cell's metrics)."""
SWEEP_KEYS = ("view_noises", "points")
"""The synthetic pseudo-collapsed cell: its view noises and one point (METRIC_KEYS + view_noise, gap) each."""
CIFAR_KEYS = ("status", "data_source", "backbone", "backbone_mode", "recipe", "n_images", "view_gap_deg",
              "view_gap_z_deg", "view_gap_other_mode_deg", "state_gap_deg", "point", "gap_sweep", "sweep_vs_point")
"""The measured state's cell (status "measured"; an "absent" cell holds status, data_source and message)."""
CROSSING_KEYS = METRIC_KEYS[METRIC_KEYS.index("crossing_margin"):]


def build_head(config: C4Config, activation: str, seed: int, weight_scale: float = 1.0,
               widths: tuple[int, int, int] | None = None) -> ProjectionHead:
    """Linear(d→hidden) → act → Linear(hidden→k) in float64, eval mode (``widths`` (d, hidden, k), default the
    constructed states'). The same seed gives the same Linear weights for every activation, so activations are
    compared on one draw."""
    torch.manual_seed(seed)
    head = ProjectionHead(HeadSpec(widths or (config.d, config.hidden, config.k), activation=activation,
                                   bias=config.bias), dtype=torch.float64).eval()
    if weight_scale != 1.0:
        scale_linear_weights_(head, weight_scale)
    return head


def _kink_distance(head: ProjectionHead, z: torch.Tensor) -> float:
    """min |pre-activation| over the hidden units (how far a ReLU head is from its kinks)."""
    with torch.no_grad():
        return float(head.layers[0](z).abs().min())


def _point_magnitude(point: CollapsedPoint, magnitude: str) -> float:
    """Mean over samples of ‖u_i − c_i‖ (``residual``) or ∠(u_i, c_i) in radians (``angle``)."""
    if magnitude == "residual":
        return float((point.u - point.target).norm(dim=1).mean())
    return float(view_angles(point.u, point.target).mean())


def _primary(sweep: dict[str, Any]) -> tuple[float | None, str]:
    """The cell's threshold: the closed form (exact), or the sweep's bisection where A is singular."""
    if sweep["closed_form_status"] == A_SINGULAR:
        return sweep["threshold"], f"{A_SINGULAR}: sweep {sweep['status']}"
    return sweep["threshold_closed_form"], sweep["closed_form_status"]


def measure_point(config: C4Config, head: ProjectionHead, point: CollapsedPoint, reading: str, weight_scale: float,
                  sweep: dict[str, Any] | None = None, operand_floor: bool = False, dense: bool = True
                  ) -> dict[str, Any]:
    """The keys of :data:`METRIC_KEYS` at ``point``; ``sweep``: its threshold sweep (equilibria), if run;
    ``operand_floor``: the sign floor relative to G's operands too (:mod:`headgeom.geometry.engine.operand_scale`), as the
    tracker's, for states whose tangential G cancels large terms (a measured state); ``dense``: the dense
    cross-check when N·d ≤ dense_max (once per synthetic sweep: its points share the engine path)."""
    res = equilibrium_residual(head, point)
    eh = effective_hessian(head, point.loss(), point.z, reading=ENGINE_READING[reading],
                           max_dense=max(config.dense_max, 1))
    scale = float(eh.operand_scale().value) if operand_floor else None
    h, g, m = eh.decomposed_blocks()
    s_h, s_g, s_m = (spectrum(x, config.rel_floor, scale=scale if x is not m else None) for x in (h, g, m))
    # ‖X‖_F² = Σλ² for symmetric X: the Frobenius ratios come from the eigenvalues, no extra SVDs
    fro = {name: float(sp.eigenvalues.square().sum().sqrt()) for name, sp in (("H", s_h), ("G", s_g), ("M", s_m))}
    scale_h = max(abs(s_h.lambda_min), abs(s_h.lambda_max))
    n, d = point.z.shape
    magnitude = MAGNITUDE_OF_READING[reading]
    out: dict[str, Any] = {
        "objective": point.objective, "N": n, "d": d, "k": point.u.shape[1], "hidden": head.layers[0].out_features,
        "weight_scale": weight_scale, "null_dim": point.null_dim,
        "equilibrium": bool(res["relative"] <= config.equilibrium_tol),
        "grad_z_norm": res["grad_norm"], "grad_z_rel": res["relative"], "rho_norm": res["rho_norm"],
        "jac_norm": res["jac_norm"], "rho_design_error": res["rho_design_error"],
        "u_norm_mean": float(point.u.norm(dim=1).mean()), "kink_distance": _kink_distance(head, point.z),
        "floor": s_h.floor, "operand_scale": scale, "lambda_min_H": s_h.lambda_min, "lambda_max_H": s_h.lambda_max,
        "n_negative_H": s_h.n_negative, "n_zero_H": s_h.n_zero,
        "lambda_min_G": s_g.lambda_min, "lambda_max_G": s_g.lambda_max, "n_negative_G": s_g.n_negative,
        "lambda_min_M": s_m.lambda_min, "lambda_max_M": s_m.lambda_max, "n_negative_M": s_m.n_negative,
        "M_fro": fro["M"],
        "M_ratio_fro": fro["M"] / fro["H"] if fro["H"] > 0 else None,
        "G_ratio_fro": fro["G"] / fro["H"] if fro["H"] > 0 else None,
        "lambda_min_rel_H": s_h.lambda_min / scale_h if scale_h > 0 else 0.0,
        "dense": False, "dense_lambda_min_H": None, "dense_n_negative_H": None,
        "dense_block_gap": None, "dense_offblock_max": None,
        "magnitude": magnitude, "point_magnitude": _point_magnitude(point, magnitude),
        "sweep_grid": sweep and sweep["grid"], "sweep_lambda_min": sweep and sweep["lambda_min"],
        "sweep_floor": sweep and sweep["floor"], "threshold_sweep": sweep and sweep["threshold"],
        "threshold_sweep_status": sweep and sweep["status"], "threshold_rel_tol": config.threshold_rel_tol,
        "threshold": sweep and _primary(sweep)[0], "threshold_status": sweep and _primary(sweep)[1],
        "threshold_ratio": state_ratio(g, m, s_g.floor),
        **{key: (sweep or {}).get(key) for key in CROSSING_KEYS},
    }
    if dense and n * d <= config.dense_max:
        full = eh.dense()
        s_full = spectrum(full, config.rel_floor, scale=scale)
        off = full.reshape(n, d, n, d).clone()
        ar = torch.arange(n)
        off[ar, :, ar, :] = 0.0
        lam_blocks = torch.sort(s_h.eigenvalues.reshape(-1)).values
        out.update({
            "dense": True, "dense_lambda_min_H": s_full.lambda_min, "dense_n_negative_H": s_full.n_negative,
            "dense_block_gap": float((s_full.eigenvalues - lam_blocks).abs().max()) / max(scale_h, 1e-300),
            "dense_offblock_max": float(off.abs().max()),
        })
    return out


def _equilibrium_cell(config: C4Config, act: str, state: str, reading: str, seed: int) -> dict[str, Any]:
    scale = 1.0 if state == "equilibrium" else config.pseudo_scale
    head = build_head(config, act, seed, scale)
    gen = torch.Generator().manual_seed(10_000 + seed)
    z_bar = config.z_scale * torch.randn(config.d, generator=gen, dtype=torch.float64)
    point = collapsed_equilibrium(head, z_bar, config.n_samples, OBJECTIVE_OF_READING[reading],
                                  residual=config.mse_residual, angle=config.cosine_angle, generator=gen)
    sweep = None
    if state in config.sweep_states:
        magnitude = MAGNITUDE_OF_READING[reading]
        lo, hi = config.residual_range if magnitude == "residual" else config.angle_range
        sweep = threshold_sweep(head, z_bar, config.n_samples, reading, log_grid(lo, hi, config.sweep_points),
                                seed=20_000 + seed, rel_floor=config.rel_floor, rel_tol=config.threshold_rel_tol)
    return measure_point(config, head, point, reading, scale, sweep)


def _synthetic_cell(config: C4Config, act: str, reading: str, seed: int) -> dict[str, Any]:
    """The paper's init at z ~ z_scale · N(0, I), one point per view noise (the same z and ε throughout)."""
    head = build_head(config, act, seed, config.pseudo_scale)
    gen = torch.Generator().manual_seed(10_000 + seed)
    z = config.z_scale * torch.randn(config.n_samples, config.d, generator=gen, dtype=torch.float64)
    state = gen.get_state()
    points = []
    for noise in config.view_noises:
        gen.set_state(state)  # one ε for every noise: the sweep moves along one direction of second views
        point = pseudo_collapsed_point(head, z, OBJECTIVE_OF_READING[reading], view_noise=noise, generator=gen)
        out = measure_point(config, head, point, reading, config.pseudo_scale, dense=noise == config.view_noises[0])
        out.update(view_noise=float(noise), gap=float(view_angles(point.u, point.target).mean()))
        points.append(out)
    return {"view_noises": [float(v) for v in config.view_noises], "points": points}


def data_cell(config: C4Config) -> dict[str, str]:
    """What the measured state's cells read, part of their key: "binary"/"jpeg" and the place, or "absent" (so a
    rerun after CIFAR-10 appears gets new cells instead of reusing an absent one)."""
    found = locate_cifar10(config.data_dir)
    return {"data": "absent"} if found is None else {"data": f"{found[0]} {found[1]}"}


@functools.lru_cache(maxsize=16)  # every seed of a preset: cells cycle through the seeds
def _features(width: float, per_class: int, recipe: str, seed: int, data_dir: str | None
              ) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], str]:
    """({backbone mode: (z1, z2)} float64 (n, d) of the two views of each image, the data source): the CIFAR
    ResNet-18 at the init of ``seed`` on the first ``per_class`` test images of each class, each view batch
    through the backbone in one forward (train mode: BatchNorm on that batch's statistics). Cached per process:
    every activation and reading of a seed reads the same features."""
    images, source = cifar10_test_images(per_class, data_dir)
    x = images.images.float().div_(255)
    views = get_recipe(recipe, x.shape[-1])(x, torch.Generator().manual_seed(30_000 + seed))
    torch.manual_seed(seed)
    backbone = get_backbone("resnet18", width=width)
    out = {}
    with torch.no_grad():
        for mode in ("train", "eval"):
            backbone.train(mode == "train")
            out[mode] = tuple(backbone(v).to(torch.float64) for v in views[:2])
    return out, source


def _degrees(x: torch.Tensor) -> list[float]:
    return [math.degrees(float(v)) for v in x]


def _cifar_cell(config: C4Config, act: str, reading: str, seed: int, data: str) -> dict[str, Any]:
    """The paper's init on CIFAR-10: z1, z2 the backbone's representations of two augmented views; the view gap
    over every image, the state of the first ``cifar_samples`` images and its gap sweep."""
    if data == "absent":
        return {"status": "absent", "data_source": data, "message": missing_message(config.data_dir)}
    feats, source = _features(config.backbone_width, config.cifar_per_class, config.recipe, seed, config.data_dir)
    (z1, z2), (o1, o2) = feats[config.backbone_mode], feats["eval" if config.backbone_mode == "train" else "train"]
    head = build_head(config, act, seed, config.pseudo_scale, (z1.shape[1], config.cifar_hidden, config.cifar_k))
    with torch.no_grad():
        gap = view_angles(head(z1), head(z2))
        other = view_angles(head(o1), head(o2))
    n = config.cifar_samples
    point = two_view_point(head, z1[:n], z2[:n], OBJECTIVE_OF_READING[reading])
    measured = measure_point(config, head, point, reading, config.pseudo_scale, operand_floor=True, dense=False)
    sweep = gap_sweep(head, point, reading, config.gap_multipliers, rel_floor=config.rel_floor,
                      operand_scale=measured["operand_scale"])
    at_one = next(s for s in sweep if s["multiplier"] == 1.0)
    scale = max(abs(measured["lambda_min_H"]), abs(measured["lambda_max_H"]), 1e-300)
    return {"status": "measured", "data_source": source, "backbone": f"resnet18 width {config.backbone_width:g}",
            "backbone_mode": config.backbone_mode, "recipe": config.recipe, "n_images": int(z1.shape[0]),
            "view_gap_deg": _degrees(gap), "view_gap_z_deg": _degrees(view_angles(z1, z2)),
            "view_gap_other_mode_deg": _degrees(other), "state_gap_deg": math.degrees(at_one["gap"]),
            "point": measured, "gap_sweep": sweep,
            # the two-term sweep at s = 1 is the state itself: its λ_min against the direct evaluation's
            "sweep_vs_point": abs(at_one["lambda_min_H"] - measured["lambda_min_H"]) / scale}


def run_cell(config: C4Config, cell: dict[str, Any]) -> dict[str, Any]:
    """One cell's measurement (module docstring): METRIC_KEYS (equilibria), SWEEP_KEYS (the synthetic state),
    CIFAR_KEYS (the measured state)."""
    act, state, reading, seed = cell["activation"], cell["state"], cell["reading"], int(cell["seed"])
    if state not in STATES or reading not in READINGS:
        raise ValueError(f"C4 cell {cell}: state must be one of {STATES} and reading one of {READINGS}")
    if state in EQUILIBRIUM_STATES:
        return _equilibrium_cell(config, act, state, reading, seed)
    if state == SYNTHETIC:
        return _synthetic_cell(config, act, reading, seed)
    assert state == MEASURED
    return _cifar_cell(config, act, reading, seed, cell.get("data", "absent"))
