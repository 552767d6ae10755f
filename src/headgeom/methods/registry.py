"""Methods by name, and ``build_method``: backbone + projector + predictor + hyper-parameters.

>>> m = build_method("simsiam", backbone="resnet18", backbone_options={"width": 0.125},
...                  head="d-64-64:silu", predictor="d-16-64:silu", pseudo_collapse=0.1)
>>> m.spec.head, m.spec.predictor
('64-64-64:silu', '64-16-64:silu')
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from torch import nn

from headgeom.backbones import get_backbone
from headgeom.heads import HeadSpec, ProjectionHead, scale_linear_weights_
from headgeom.heads.offset import OutputOffset, check_collapse
from headgeom.heads.resolution import resolve_head
from headgeom.methods.base import SSLMethod
from headgeom.methods.contrastive import SimCLR, SimCLROneWay
from headgeom.methods.dino import DINO
from headgeom.methods.mocov3 import MoCoV3
from headgeom.methods.redundancy import BarlowTwins, VICReg
from headgeom.methods.siamese import BYOL, SimSiam
from headgeom.methods.spec import CUSTOM_BACKBONE, MethodSpec

METHODS: dict[str, type[SSLMethod]] = {
    cls.name: cls for cls in (SimCLR, SimCLROneWay, SimSiam, BYOL, VICReg, BarlowTwins, DINO, MoCoV3)
}

COMMON_OPTIONS = ("recipe",)  # every method: the augmentation recipe name (None = the method's)


def get_method_class(name: str) -> type[SSLMethod]:
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]


def _resolve_options(cls: type[SSLMethod], options: Mapping[str, Any]) -> dict[str, Any]:
    """The method's defaults updated by ``options``, each checked against its default's type."""
    allowed = dict(cls.DEFAULTS)
    unknown = sorted(set(options) - set(allowed) - set(COMMON_OPTIONS))
    if unknown:
        raise TypeError(
            f"method {cls.name!r} got unknown option(s) {unknown}; it takes {sorted(allowed) + list(COMMON_OPTIONS)}"
        )
    out: dict[str, Any] = dict(allowed)
    for key, value in options.items():
        if key == "recipe":
            if value is not None and not isinstance(value, str):
                raise TypeError(f"option recipe must be a recipe name or None; got {value!r}")
            out[key] = value
            continue
        default = allowed[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{cls.name} option {key} must be a number (default {default!r}); got {value!r}")
        if isinstance(default, int):
            if not isinstance(value, int) and not float(value).is_integer():
                raise TypeError(f"{cls.name} option {key} must be an int (default {default}); got {value!r}")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{cls.name} option {key} must be finite; got {value!r}")
        out[key] = value
    out.setdefault("recipe", None)
    return out


def _make_backbone(backbone: str | nn.Module, options: Mapping[str, Any]) -> tuple[nn.Module, str, int]:
    if isinstance(backbone, str):
        module = get_backbone(backbone, **dict(options))
        return module, backbone, int(module.feature_dim)
    if isinstance(backbone, nn.Module):
        if options:
            raise ValueError("backbone_options apply to a backbone given by name, not to a module")
        dim = getattr(backbone, "feature_dim", getattr(backbone, "out_dim", None))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise TypeError(
                f"a backbone module must carry its representation width as an int attribute "
                f"feature_dim (or out_dim); {type(backbone).__name__} has {dim!r}. Set "
                f"module.feature_dim = d for outputs of shape (N, d)."
            )
        return backbone, CUSTOM_BACKBONE, dim
    raise TypeError(f"backbone must be a registered name or an nn.Module; got {type(backbone).__name__} {backbone!r}")


def build_method(
    name: str,
    backbone: str | nn.Module = "resnet18",
    head: HeadSpec | str | None = None,
    predictor: HeadSpec | str | None = None,
    pseudo_collapse: float | None = None,
    *,
    collapse: float | None = None,
    backbone_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> SSLMethod:
    """Build SSL method ``name`` (docs/design.md#method-interface).

    backbone: a name for :func:`headgeom.backbones.get_backbone` (with ``backbone_options``,
      e.g. {"width": 0.5}) or an nn.Module with an int ``feature_dim``.
    head / predictor: preset name, compact string (first width d, or ``d-`` to fill it in) or
      HeadSpec; None gives the method's default. A predictor for a method without one raises.
    pseudo_collapse: α; the projector's Linear weights are multiplied by α at init (paper: 0.1).
    collapse: the induced collapse's depth (a fraction of 1/√k, k the projector's output width): the
      projector ends with a fixed :class:`~headgeom.heads.offset.OutputOffset`, zero here; training sizes it
      on its probe batch (:func:`headgeom.train.collapse.calibrate_offset`) and checkpoints keep it.
    options: the method's hyper-parameters (``METHODS[name].DEFAULTS``) and ``recipe``.
    """
    cls = get_method_class(name)
    opts = _resolve_options(cls, options)
    if predictor is not None and not cls.HAS_PREDICTOR:
        with_pred = sorted(n for n, c in METHODS.items() if c.HAS_PREDICTOR)
        raise ValueError(
            f"method {name!r} has no predictor, but predictor={predictor!r} was given; only "
            f"{with_pred} use one. Drop the predictor (the projector is set by head=...)."
        )
    if pseudo_collapse is not None:
        if isinstance(pseudo_collapse, bool) or not isinstance(pseudo_collapse, (int, float)) \
                or not math.isfinite(pseudo_collapse):
            raise ValueError(f"pseudo_collapse must be a finite float alpha (paper: 0.1) or None; got {pseudo_collapse!r}")
        pseudo_collapse = float(pseudo_collapse)
    collapse = check_collapse(collapse)
    bb_options = dict(backbone_options or {})
    module, bb_name, d = _make_backbone(backbone, bb_options)
    source = f"backbone {bb_name if bb_name != CUSTOM_BACKBONE else type(module).__name__!r}"
    head_spec = resolve_head(head, d, role="projector", source=source, default=cls.default_head)
    pred_spec = None
    if cls.HAS_PREDICTOR:
        k = head_spec.out_dim
        pred_spec = resolve_head(predictor, k, role="predictor", source=f"projector {head_spec.to_string()!r}",
                                 default=cls.default_predictor)
        if pred_spec.out_dim != k:
            raise ValueError(
                f"predictor {pred_spec.to_string()!r} outputs width {pred_spec.out_dim}, but {name} "
                f"compares it with projector outputs of width {k}; end the predictor with {k}"
            )
    projector = ProjectionHead(head_spec)
    if pseudo_collapse is not None:
        scale_linear_weights_(projector, pseudo_collapse)
    if collapse is not None:
        projector.layers.append(OutputOffset(head_spec.out_dim))
    pred_module = ProjectionHead(pred_spec) if pred_spec is not None else None
    spec = MethodSpec(
        name=name, backbone=bb_name, backbone_options=bb_options, feature_dim=d,
        head=head_spec.to_string(), predictor=pred_spec.to_string() if pred_spec is not None else None,
        pseudo_collapse=pseudo_collapse, collapse=collapse, options=opts,
    )
    return cls(module, projector, pred_module, spec)


def build_method_from_spec(spec: MethodSpec | Mapping[str, Any], backbone: nn.Module | None = None) -> SSLMethod:
    """Rebuild a method from its MethodSpec (or ``spec.to_dict()``); a ``"custom"`` backbone
    must be passed again as ``backbone``."""
    if not isinstance(spec, MethodSpec):
        spec = MethodSpec.from_dict(spec)
    if spec.backbone == CUSTOM_BACKBONE:
        if backbone is None:
            raise ValueError(
                "this MethodSpec was built with a custom backbone module; pass it again: "
                "build_method_from_spec(spec, backbone=module)"
            )
        bb: str | nn.Module = backbone
    else:
        if backbone is not None:
            raise ValueError(f"the spec names backbone {spec.backbone!r}; do not pass a module as well")
        bb = spec.backbone
    options = {k: v for k, v in spec.options.items() if not (k == "recipe" and v is None)}
    method = build_method(
        spec.name, bb, head=spec.head, predictor=spec.predictor, pseudo_collapse=spec.pseudo_collapse,
        collapse=spec.collapse,
        backbone_options=None if spec.backbone == CUSTOM_BACKBONE else spec.backbone_options, **options,
    )
    if method.spec.feature_dim != spec.feature_dim:
        raise ValueError(
            f"the rebuilt backbone has feature dim {method.spec.feature_dim}, the spec {spec.feature_dim}"
        )
    return method
