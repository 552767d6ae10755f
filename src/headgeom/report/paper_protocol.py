"""The authors' protocol (docs/paper.md §3, and each claim's setup in §2) as data, and where our
paper presets depart from it.

Each experiment declares its own protocol (``Experiment.protocol``, a :class:`PaperProtocol`): for each
key setting the value the paper states, and where our ``paper`` preset departs from it, with the reason.
This module is the home of what they share: the paper's two training recipes (:data:`SIMSIAM`,
:data:`SIMCLR`), its backbones and head strings, and how a preset's settings are read
(:func:`preset_settings`: from the ``headgeom.train.TrainConfig`` of every cell
(``Experiment.train_config``), then the number of seeds and runs, then the experiment's config).
``headgeom reproduce --dry-run`` prints both side by side, and the tests check that the paper preset
equals the paper everywhere except at the listed differences (and that every listed difference is a
real one).

Settings the paper describes in words that no config field holds (C8's curvature estimate) are
written as text on both sides: the paper's in ``settings``, ours in ``described``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from headgeom.methods.registry import get_method_class

__all__ = ["RESNET18", "SECTION", "SIMCLR", "SIMSIAM", "VIT_TINY", "PaperProtocol", "as_set", "paper_heads",
           "paper_predictors", "preset_settings", "show", "train_settings"]

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


def paper_heads(acts: tuple[str, ...], bn: bool = False) -> tuple[str, ...]:
    """The paper's SimSiam projector (2048-2048, no bias) with each activation, as head strings."""
    return tuple(f"d-2048-2048:{a}:nobias" + (":bn:last=bn" if bn else "") for a in acts)


def paper_predictors(acts: tuple[str, ...], bn: bool = False) -> tuple[str, ...]:
    """The paper's SimSiam predictor (512-2048, no bias) with each activation, as head strings."""
    return tuple(f"d-512-2048:{a}:nobias" + (":bn" if bn else "") for a in acts)


@dataclass(frozen=True)
class PaperProtocol:
    """An experiment's protocol in the paper: ``settings`` holds, for each key setting, the value the paper
    states (a tuple: the set of values over the paper's runs, e.g. the grid's three learning rates);
    ``described``: our preset's side, in words, of a setting no config field holds (C8's curvature estimate);
    ``differences``: the settings where our ``paper`` preset departs from the paper, each with the reason."""

    settings: Mapping[str, Any]
    described: Mapping[str, str] = field(default_factory=dict)
    differences: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("described", "differences"):
            extra = sorted(set(getattr(self, name)) - set(self.settings))
            if extra:
                raise ValueError(f"a paper protocol's {name} name settings the paper's do not: {extra}; "
                                 f"it states {sorted(self.settings)}")


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
    described = exp.protocol.described if exp.protocol is not None else {}
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
