"""C4's settings: the states, readings and presets (the experiment is described in the package docstring)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from headgeom.launch.resources import Resources
from headgeom.runs.cell import check_known
from headgeom.theory.collapse_threshold import log_grid

EQUILIBRIUM_STATES = ("equilibrium", "scaled-equilibrium")
SYNTHETIC = "pseudo-collapsed"  # the paper's init at z ~ N(0, I), the second view z + view_noise * eps (set, swept)
MEASURED = "cifar10-init"  # the paper's init on CIFAR-10 through the backbone, the second view a real augmentation
STATES = (*EQUILIBRIUM_STATES, SYNTHETIC, MEASURED)
READINGS = ("ambient", "tangential", "mse")
NON_SMOOTH = ("linear", "relu")  # M = 0 (everywhere / away from kinks); all others are smooth
BACKBONE_MODES = ("train", "eval")

__all__ = ["BACKBONE_MODES", "C4Config", "EQUILIBRIUM_STATES", "MEASURED", "NON_SMOOTH", "READINGS", "RESOURCES",
           "STATES", "SYNTHETIC", "paper", "quick", "small", "validate"]


@dataclass(frozen=True)
class C4Config:
    """Every setting of C4 (the package docstring says what each state is)."""

    preset: str = "quick"
    d: int = 8  # representation dim of the constructed states
    hidden: int = 32  # head hidden width
    k: int = 16  # head output dim (k > d: expander, so equilibria with ρ ≠ 0 exist)
    n_samples: int = 4  # N, batch size of the constructed states
    activations: tuple[str, ...] = ("linear", "relu", "gelu", "silu", "softplus", "tanh")
    states: tuple[str, ...] = STATES
    readings: tuple[str, ...] = READINGS
    seeds: int = 5
    bias: bool = False  # the paper's projector has bias-free Linears
    pseudo_scale: float = 0.1  # Linear weights ×0.1: the paper's pseudo-collapsed init
    z_scale: float = 1.0  # z̄ ~ z_scale · N(0, I)
    mse_residual: float = 1.0  # ‖u − c_i‖ at MSE equilibria
    cosine_angle: float = math.pi / 4  # ∠(u, c_i) at cosine equilibria, radians
    # the synthetic pseudo-collapsed state's second views z + view_noise · ε: a sweep, not one setting
    view_noises: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
    residual_range: tuple[float, float] = (1e-3, 10.0)  # threshold sweep of ‖u − c_i‖ (MSE loss), log grid
    # threshold sweep of ∠(u, c_i) (cosine readings). It stops short of π/2: there the target is ⟂ u, the
    # Gauss-Newton part G ∝ cos θ vanishes, and a linear or ReLU head's H_eff is 0 up to round-off
    angle_range: tuple[float, float] = (1e-3, 0.99 * math.pi / 2)
    sweep_points: int = 12  # grid points of each sweep
    sweep_states: tuple[str, ...] = EQUILIBRIUM_STATES  # equilibrium states whose cells run the threshold sweep
    threshold_rel_tol: float = 0.01  # bisection stops when hi/lo <= 1 + this (threshold within that factor)
    rel_floor: float = 1e-10  # λ < −rel_floor·max|λ| counts as negative (docs/paper.md §4 pitfall 2)
    equilibrium_tol: float = 1e-10  # ‖∇_z L‖ / (‖J‖₂‖ρ‖) below this counts as an equilibrium
    dense_max: int = 256  # dense H_eff cross-check when N·d ≤ dense_max
    majority: float = 0.8  # fraction of seeds a smooth head must be past its threshold in
    # the measured state (cifar10-init): CIFAR-10 test images, the paper's SimSiam views, the CIFAR ResNet-18 at
    # init, a head at the backbone's width with the pseudo-collapse
    backbone_width: float = 0.125  # the training experiments' quick width (d = 64)
    cifar_hidden: int = 128  # head d -> cifar_hidden -> cifar_k (GRID/C8 quick: 64-128-128)
    cifar_k: int = 128
    cifar_per_class: int = 20  # test images per class whose two views give the view gap
    cifar_samples: int = 4  # N of the measured state whose H_eff is analysed (the first N of those images)
    backbone_mode: str = "train"  # BatchNorm on batch statistics, as the training loss's forward sees it at step 0
    recipe: str = "paper_simsiam"  # the paper's SimSiam views: crop (0.2, 1) + flip, no normalisation
    gap_multipliers: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 3.0)  # the measured gap × these (1: as measured)
    data_dir: str | None = None  # CIFAR-10 (binary layout); None: $HEADGEOM_DATA, then $HEADGEOM_CIFAR10_JPEG
    num_threads: int | None = 1  # torch threads inside a cell (tiny problems: one thread is fastest); None: as set


def quick() -> C4Config:
    """Constructed states on heads 8-32-16 (N = 4, 5 seeds); the measured state on 200 CIFAR-10 test images
    through the CIFAR ResNet-18 at width 0.125 (d = 64) with heads 64-128-128 (N = 4); 6 activations.

    Command: ``headgeom reproduce --only C4 --preset quick``. Runtime: about 40-80 s of CPU on 2 cores (no GPU
    used: float64 CPU analysis; the ResNet forward passes are the measured state's). Measures the exact
    spectra of H_eff, G, M at constructed collapsed equilibria (with the threshold sweeps), at the synthetic
    pseudo-collapsed init over its view-noise sweep, and at the measured init with its gap sweep. Without
    CIFAR-10 (``$HEADGEOM_CIFAR10_JPEG`` or the binary layout) the measured state's rows say how to get it.
    """
    return C4Config(preset="quick")


def small() -> C4Config:
    """Constructed states on heads 64-256-256 (N = 8, 5 seeds; no dense cross-check, N·d = 512 > dense_max);
    the measured state as in quick.

    Command: ``headgeom reproduce --only C4 --preset small``. Runtime: a few minutes of CPU on 2 cores (not
    re-measured; no GPU used). Measures the same quantities as quick at a width where the head is less tiny.
    """
    return C4Config(preset="small", d=64, hidden=256, k=128, n_samples=8)


def paper() -> C4Config:
    """The paper's projector 512-2048-2048 (bias-free Linears, no BN; docs/paper.md §3), N = 4, 5 seeds; the
    measured state through the CIFAR ResNet-18 at width 1 (d = 512) with the same projector.

    Command: ``headgeom reproduce --only C4 --preset paper``. Runtime, measured on 2 shared CPU cores (load
    4-12, no GPU used) before the measured state was added: 1.4-86 s per cell, the equilibrium cells (two exact
    anchors of the sweep) the costly ones; 72 cells (four activations, two seeds, a 4-point cross-check sweep)
    took 1,179 s of cell time (BENCHMARKS.md). Measures the same quantities at the paper's widths; the threshold
    is the closed form, the sweep only its cross-check.
    """
    return C4Config(preset="paper", d=512, hidden=2048, k=2048, n_samples=4, backbone_width=1.0, cifar_hidden=2048,
                    cifar_k=2048, cifar_samples=4, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; one cell 10-30 s on 2 shared cores (measured)
RESOURCES = {"paper": Resources(cpus=4, mem_gb=8, time_min=30, expected_min=0.5)}


def validate(config: C4Config) -> None:
    """ValueError naming the first setting that cannot be run."""
    for name, values, allowed in (("states", config.states, STATES), ("readings", config.readings, READINGS),
                                  ("sweep_states", config.sweep_states, EQUILIBRIUM_STATES)):
        check_known(f"C4 config {name}", values, allowed)
    for name, (lo, hi) in (("residual_range", config.residual_range), ("angle_range", config.angle_range)):
        log_grid(lo, hi, max(config.sweep_points, 2))  # raises on a bad range
        if name == "angle_range" and hi >= math.pi:
            raise ValueError(f"C4 angle_range must stay below pi (the target would equal -u); got {hi!r}")
    if config.k <= config.d:
        raise ValueError(f"C4 needs an expander head (k > d) for equilibria with rho != 0; got d={config.d}, k={config.k}")
    if not config.view_noises or any(not (v >= 0 and math.isfinite(v)) for v in config.view_noises):
        raise ValueError(f"C4 view_noises must be finite numbers >= 0 (the synthetic second views' noise); "
                         f"got {config.view_noises!r}")
    if 1.0 not in config.gap_multipliers or any(not (s >= 0 and math.isfinite(s)) for s in config.gap_multipliers):
        raise ValueError(f"C4 gap_multipliers must be finite numbers >= 0 and include 1 (the gap as measured); "
                         f"got {config.gap_multipliers!r}")
    if config.backbone_mode not in BACKBONE_MODES:
        raise ValueError(f"C4 backbone_mode must be one of {BACKBONE_MODES}; got {config.backbone_mode!r}")
    if not 1 <= config.cifar_samples <= 10 * config.cifar_per_class:
        raise ValueError(f"C4 cifar_samples must lie in [1, 10 * cifar_per_class = {10 * config.cifar_per_class}]; "
                         f"got {config.cifar_samples!r}")
