"""ProjectionHead: a HeadSpec built as one flat nn.Sequential of plain torch leaf modules.

Layout: the head's only submodule is ``self.layers``, an nn.Sequential of nn.Linear,
nn.BatchNorm1d, nn.LayerNorm, torch activation modules and ``L2Normalize`` in forward order,
with no wrapper blocks (the effective-Hessian engine traces ``forward`` into that chain, as it
does any head's: headgeom.geometry.engine.discovery). The DINO last layer is an nn.Linear parametrised by
torch.nn.utils.parametrizations.weight_norm (so ``layer.weight`` is g · v / ‖v‖ row-wise).
"""
from __future__ import annotations

import dataclasses
import inspect
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from headgeom.heads.activations import get_act, is_identity
from headgeom.heads.presets import HEAD_PRESETS
from headgeom.heads.spec import HeadSpec, parse_head


class L2Normalize(nn.Module):
    """x / max(‖x‖₂, eps) along the last dim, as DINOHead's ``F.normalize(x, dim=-1, p=2)``."""

    def __init__(self, eps: float = 1e-12) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:  # (..., b) -> (..., b)
        return F.normalize(x, p=2.0, dim=-1, eps=self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"


def _norm(kind: str, width: int, factory: dict) -> nn.Module | None:
    if kind == "none":
        return None
    if kind == "bn":
        return nn.BatchNorm1d(width, **factory)
    if kind == "bn_noaffine":
        return nn.BatchNorm1d(width, affine=False, **factory)
    if kind == "ln":
        return nn.LayerNorm(width, **factory)
    raise ValueError(f"unknown norm {kind!r}")  # unreachable: HeadSpec validates


def dino_init_(layers: list[nn.Module]) -> None:
    """DINOHead's ``_init_weights`` on its MLP: every Linear's weight from trunc_normal(std=0.02)
    (truncated at ±2), bias 0. DINOHead applies it before it creates the weight-normed last
    layer, which keeps nn.Linear's default initialisation; so does the caller."""
    with torch.no_grad():
        for layer in layers:
            if isinstance(layer, nn.Linear):
                nn.init.trunc_normal_(layer.weight, std=0.02)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


def build_layers(spec: HeadSpec, device=None, dtype=None) -> list[nn.Module]:
    """The leaf modules of ``spec`` in forward order (see headgeom.heads.spec for the layout)."""
    factory = {"device": device, "dtype": dtype}
    layers: list[nn.Module] = []
    w = spec.widths

    def hidden(w_in: int, w_out: int) -> None:
        layers.append(nn.Linear(w_in, w_out, bias=spec.bias, **factory))
        norm = _norm(spec.norm, w_out, factory)
        if norm is not None:
            layers.append(norm)
        if not is_identity(spec.activation):
            layers.append(get_act(spec.activation, **spec.act_kwargs))

    for w_in, w_out in zip(w[:-2], w[1:-1]):
        hidden(w_in, w_out)
    if spec.bottleneck is None:
        layers.append(nn.Linear(w[-2], w[-1], bias=spec.effective_last_bias, **factory))
    else:
        # DINOHead: mlp(... -> bottleneck), normalize, weight_norm(Linear(b, out, bias=False)),
        # weight_g filled with 1 and frozen when norm_last_layer.
        layers.append(nn.Linear(w[-2], spec.bottleneck, bias=spec.bias, **factory))
        dino_init_(layers)
        layers.append(L2Normalize())
        last = weight_norm(nn.Linear(spec.bottleneck, w[-1], bias=False, **factory), dim=0)
        g = last.parametrizations.weight.original0  # (out, 1)
        with torch.no_grad():
            g.fill_(1.0)
        g.requires_grad_(not spec.norm_last_layer)
        layers.append(last)
    norm = _norm(spec.last_norm, w[-1], factory)
    if norm is not None:
        layers.append(norm)
    return layers


class ProjectionHead(nn.Module):
    """u = h(z) for z of shape (N, widths[0]) -> u of shape (N, widths[-1]).

    ``device="meta"`` builds the structure without allocating memory (for counting the
    parameters of the 8192-wide presets).
    """

    def __init__(self, spec: HeadSpec, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        if not isinstance(spec, HeadSpec):
            raise TypeError(
                f"ProjectionHead expects a HeadSpec, got {type(spec).__name__} {spec!r}; "
                f"use head_from('512-2048-2048:silu') or head_from('simclr') for strings and presets"
            )
        super().__init__()
        self.spec = spec
        self.layers = nn.Sequential(*build_layers(spec, device=device, dtype=dtype))

    @property
    def in_dim(self) -> int:
        return self.spec.in_dim

    @property
    def out_dim(self) -> int:
        return self.spec.out_dim

    def forward(self, z: Tensor) -> Tensor:  # (N, d) -> (N, k)
        if z.shape[-1] != self.spec.in_dim:
            raise ValueError(
                f"head {self.spec.to_string()!r} expects inputs with last dim {self.spec.in_dim}, "
                f"got shape {tuple(z.shape)}; pass z of shape (N, {self.spec.in_dim})"
            )
        return self.layers(z)

    def extra_repr(self) -> str:
        return f"spec={self.spec.to_string()!r}"


def _split_overrides(name: str, overrides: dict) -> tuple[dict, dict]:
    """Split ``overrides`` into preset arguments and HeadSpec field replacements."""
    preset_params = set(inspect.signature(HEAD_PRESETS[name]).parameters)
    spec_fields = {f.name for f in dataclasses.fields(HeadSpec)}
    preset_kw = {k: v for k, v in overrides.items() if k in preset_params}
    field_kw = {k: v for k, v in overrides.items() if k not in preset_params and k in spec_fields}
    unknown = sorted(set(overrides) - set(preset_kw) - set(field_kw))
    if unknown:
        raise TypeError(
            f"head_from({name!r}) got unknown override(s) {unknown}; preset arguments are "
            f"{sorted(preset_params)} and HeadSpec fields are {sorted(spec_fields)}"
        )
    return preset_kw, field_kw


def head_from(head: HeadSpec | str, device: torch.device | str | None = None,
              dtype: torch.dtype | None = None, **overrides) -> ProjectionHead:
    """Build a head from a HeadSpec, a compact string or a preset name.

    For a preset, overrides that name a preset argument (e.g. ``in_dim``) go to the preset
    function and the others replace HeadSpec fields; for a spec or string they replace fields.

    >>> head_from("paper_projector", activation="relu", bn=True).spec.to_string()
    '512-2048-2048:relu:bn:last=bn:nobias'
    """
    if isinstance(head, HeadSpec):
        spec, field_kw = head, overrides
    elif isinstance(head, str):
        if head in HEAD_PRESETS:
            preset_kw, field_kw = _split_overrides(head, overrides)
            spec = HEAD_PRESETS[head](**preset_kw)
        elif head[:1].isdigit():
            spec, field_kw = parse_head(head), overrides
        else:
            raise ValueError(
                f"{head!r} is neither a head preset ({', '.join(sorted(HEAD_PRESETS))}) nor a "
                f"compact head string such as '512-2048-2048:silu:bn'"
            )
    else:
        raise TypeError(
            f"head_from expects a HeadSpec, a compact string or a preset name, got "
            f"{type(head).__name__} {head!r}"
        )
    if field_kw:
        spec_fields = {f.name for f in dataclasses.fields(HeadSpec)}
        unknown = sorted(set(field_kw) - spec_fields)
        if unknown:
            raise TypeError(f"unknown HeadSpec field(s) {unknown}; fields are {sorted(spec_fields)}")
        spec = dataclasses.replace(spec, **field_kw)
    return ProjectionHead(spec, device=device, dtype=dtype)


@torch.no_grad()
def scale_linear_weights_(head: nn.Module, alpha: float) -> nn.Module:
    """Multiply the weight of every nn.Linear in ``head`` by ``alpha`` in place; returns head.

    The paper's pseudo-collapsed initialisation (docs/paper.md §3: projector linear weights ×0.1
    at init). Biases are untouched. For a weight-normalised Linear (DINO last layer) the
    magnitude weight_g is scaled, so its effective weight g·v/‖v‖ is scaled by alpha too
    (its rows then have norm |alpha|, and weight_g stays frozen if it was).
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise ValueError(f"alpha must be a finite number, got {alpha!r}; e.g. alpha=0.1")
    for module in head.modules():
        if not isinstance(module, nn.Linear):
            continue
        param = getattr(module, "parametrizations", None)
        if param is not None and "weight" in param:
            if len(param.weight) != 1 or not hasattr(param.weight, "original0"):
                raise TypeError(
                    f"cannot scale a Linear with weight parametrisation {param.weight!r}; "
                    f"only plain and weight_norm Linears are supported"
                )
            param.weight.original0.mul_(alpha)
        else:
            module.weight.mul_(alpha)
    return head
