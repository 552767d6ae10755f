"""The authors' protocol (docs/paper.md §3, and each claim's setup in §2) as data, and where our
paper presets depart from it.

The one home of the paper's settings. ``PROTOCOL[id]`` holds, for each key setting of an
experiment, the value the paper states; a tuple is the set of values over the paper's runs (the
grid's three learning rates, C8's two heads). ``DIFFERENCES[id]`` names the settings where our
``paper`` preset departs from it, each with the reason. :func:`preset_settings` reads the same keys
off a preset: from the ``headgeom.train.TrainConfig`` of every cell (``Experiment.train_config``),
then the number of seeds and runs, then the experiment's config. ``headgeom reproduce --dry-run``
prints both side by side, and the tests check that the paper preset equals the paper everywhere
except at the listed differences (and that every listed difference is a real one).

Settings the paper describes in words that no config field holds (C8's curvature estimate) are
written as text on both sides: the paper's in ``PROTOCOL``, ours in ``DESCRIBED``.
"""
from __future__ import annotations

from typing import Any, Callable

from headgeom.methods.registry import get_method_class

__all__ = ["DESCRIBED", "DIFFERENCES", "PROTOCOL", "SECTION", "as_set", "preset_settings", "show", "train_settings"]

SECTION = "docs/paper.md §2-3"

RESNET18 = "resnet18(width=1.0)"  # the CIFAR ResNet-18, 512-d output (§3 Backbones)
VIT_TINY = "vit_tiny"  # the builder's defaults are §3's ViT-Tiny (patch 4, width 192, 3 heads, MLP 768, 3 layers)

# the collapse grid's SimSiam (§3 "Collapse grid"): shared by GRID, C8 and the activation ablation
SIMSIAM = {"dataset": "cifar10", "backbone": RESNET18, "method": "simsiam", "augmentation": "paper_simsiam",
           "normalize": False, "optimizer": "sgd", "momentum": 0.9, "weight_decay": 0.0}
# "SimCLR for guillotine/orbits": C9, C11, C12
SIMCLR = {"dataset": "cifar10", "backbone": RESNET18, "method": "simclr_oneway", "augmentation": "paper_simclr",
          "head": "d-2048-2048:relu:nobias:bn:last=bn", "epochs": 50, "batch_size": 256, "optimizer": "adam",
          "lr": 1e-3, "temperature": 0.1}


def _heads(acts: tuple[str, ...], bn: bool = False) -> tuple[str, ...]:
    return tuple(f"d-2048-2048:{a}:nobias" + (":bn:last=bn" if bn else "") for a in acts)


def _predictors(acts: tuple[str, ...], bn: bool = False) -> tuple[str, ...]:
    return tuple(f"d-512-2048:{a}:nobias" + (":bn" if bn else "") for a in acts)


PROTOCOL: dict[str, dict[str, Any]] = {
    "GRID": {**SIMSIAM,  # linear (0.05); swish, relu × {BN, no BN} × {0.05, 0.5, 0.005}; gelu (no BN, 0.05)
             "head": _heads(("linear", "silu", "relu", "gelu")) + _heads(("silu", "relu"), bn=True),
             "predictor": _predictors(("linear", "silu", "relu", "gelu")) + _predictors(("silu", "relu"), bn=True),
             "pseudo_collapse": 0.1, "epochs": 50, "batch_size": 512, "lr": (0.005, 0.05, 0.5), "runs": 14,
             "seeds": 3, "track_every": 97},  # tracked per epoch: 50,000 // 512 steps
    "C8": {"dataset": "cifar10", "backbone": RESNET18, "method": "simsiam", "optimizer": "sgd",
           "head": _heads(("silu", "relu")),  # normal+Swish, collapsed+Swish, collapsed+ReLU; no BN
           "pseudo_collapse": (None, 0.1), "epochs": 100, "batch_size": 256, "lr": 0.05, "runs": 3,
           "track_every": 195,  # per epoch: 50,000 // 256 steps
           "curvature": "λ_min of the HVP operator of the batch loss w.r.t. z1 (power iteration), 5 batches per epoch"},
    # not a paper experiment: the grid's SimSiam at lr 0.05 with the paper's activations, no BN
    "ABLATION": {**SIMSIAM, "head": _heads(("linear", "relu", "silu", "gelu")),
                 "predictor": _predictors(("linear", "relu", "silu", "gelu")), "pseudo_collapse": 0.1,
                 "epochs": 50, "batch_size": 512, "lr": 0.05, "track_every": 97},
    "C9": {**SIMCLR, "backbone": (RESNET18, VIT_TINY), "runs": 2, "orbit_classes": 5, "orbit_per_class": 3,
           "steps": 12, "families": "rotation"},  # 12 rotations 0-330°
    # depth 1/2/3 heads (our count: hidden layers)
    "C11": {**SIMCLR, "head": ("d-2048-2048:relu:nobias:bn:last=bn", "d-2048-2048-2048:relu:nobias:bn:last=bn",
                               "d-2048-2048-2048-2048:relu:nobias:bn:last=bn"),
            "runs": 3, "orbit_classes": 5, "orbit_per_class": 3, "orbit_steps": 12},
    # rotation probe backbone vs head: C10/R18, ViT, C100
    "C12": {**SIMCLR, "dataset": ("cifar10", "cifar100"), "backbone": (RESNET18, VIT_TINY), "runs": 3},
    # the theory checks' setups stated in the claims table (§2)
    "C3": {"depths": (1, 2, 3)},  # "fit heads of depth 1-3 along a curve"
    "C5": {"lrs": (0.005, 0.05, 0.5), "bn": (False, True)},  # "gradient flow vs GD at lr 0.005/0.05/0.5, ± BN"
    "C10": {"test_images": 50, "image_size": 224, "steps": 12, "releases": 4,
            "families": ("rotation_45", "hue", "saturation", "blur")},
}

# what our preset does where no config field says it (the paper's side is in PROTOCOL)
DESCRIBED: dict[str, dict[str, str]] = {
    "C8": {"curvature": "exact eigenvalues (float64 eigh) of the per-sample H_eff blocks of 32 probe samples, "
                        "once per epoch, ambient and tangential readings"},
}

DIFFERENCES: dict[str, dict[str, str]] = {
    "C8": {
        "head": "adds a collapsed linear run: the claim (Fig. 3) is that ReLU and linear heads show no negative "
                "curvature, and the paper tracked no linear head",
        "runs": "the added collapsed-linear run (see head)",
        "curvature": "power iteration on the shifted operator is wrong when the largest-magnitude eigenvalue is "
                     "negative, and float32 HVPs under-resolve eigenvalues near 1e-6 (docs/paper.md §4 pitfalls 1-2); "
                     "exact float64 blocks with a relative floor replace it",
    },
    "ABLATION": {
        "head": "adds softplus and tanh heads: the ablation's question is smooth against non-smooth activations "
                "beyond the paper's three",
        "predictor": "follows the head's activation (see head)",
        "pseudo_collapse": "starts from the default init, as Fig. 3's normal run, so that every activation is "
                           "compared from the same uncollapsed start",
    },
    "C9": {
        "orbit_per_class": "40 test images per class instead of 3: the bootstrap CIs over images the verdicts use "
                           "need more than 15 images (C11 keeps the paper's 3)",
        "families": "adds hue, saturation and blur orbits (the pretrained protocol's), reported beside rotation; "
                    "rotation alone is judged, as in the paper",
    },
}


def train_settings(tc: Any) -> dict[str, Any]:
    """The key settings of one ``headgeom.train.TrainConfig``: dataset, backbone (with its options),
    method, augmentation recipe, normalisation, head, predictor, pseudo-collapse, epochs, batch size,
    optimiser, lr, momentum, weight decay, temperature, tracking period."""
    opts = ", ".join(f"{k}={v}" for k, v in sorted(tc.backbone_options.items()))
    return {"dataset": tc.data, "backbone": f"{tc.backbone}({opts})" if opts else tc.backbone, "method": tc.method,
            "augmentation": tc.method_options.get("recipe") or get_method_class(tc.method).RECIPE,
            "normalize": tc.normalize, "head": tc.head, "predictor": tc.predictor,
            "pseudo_collapse": tc.pseudo_collapse, "epochs": tc.epochs, "batch_size": tc.batch_size,
            "optimizer": tc.optimizer, "lr": tc.lr, "momentum": tc.momentum, "weight_decay": tc.weight_decay,
            "temperature": tc.method_options.get("temperature"), "track_every": tc.track_every}


# settings computed from a config rather than read off one of its fields
DERIVED: dict[str, Callable[[Any], Any]] = {
    "test_images": lambda c: c.n_classes * c.per_class,
    "releases": lambda c: len(c.releases),
}


def as_set(value: Any) -> frozenset:
    """A setting as the set of its values (a tuple or list is a set of values, anything else one value)."""
    return frozenset(value) if isinstance(value, (tuple, list, set, frozenset)) else frozenset([value])


def _collapse(values: list[Any]) -> Any:
    distinct = sorted(set(values), key=repr)
    return distinct[0] if len(distinct) == 1 else tuple(distinct)


def preset_settings(exp: Any, config: Any, cells: list[dict[str, Any]], n_seeds: int,
                    keys: list[str]) -> dict[str, Any]:
    """The value of each of ``keys`` in a resolved preset (one value, or the tuple of the distinct
    values over its cells); a key none of the sources has is left out."""
    per_cell = [train_settings(exp.train_config(config, c)) for c in cells] if exp.train_config else []
    described = DESCRIBED.get(exp.id, {})
    out: dict[str, Any] = {}
    for key in keys:
        if per_cell and key in per_cell[0]:
            out[key] = _collapse([s[key] for s in per_cell])
        elif key == "seeds":
            out[key] = n_seeds
        elif key == "runs":
            out[key] = len(cells) // max(n_seeds, 1)
        elif key in described:
            out[key] = described[key]
        elif key in DERIVED:
            out[key] = DERIVED[key](config)
        elif hasattr(config, key):
            v = getattr(config, key)
            out[key] = tuple(v) if isinstance(v, (list, tuple)) else v
    return out


def show(value: Any) -> str:
    """A setting as text: a set of values comma-separated, None as 'none'."""
    if isinstance(value, (tuple, list, frozenset, set)):
        return ", ".join(show(v) for v in sorted(value, key=repr))
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
