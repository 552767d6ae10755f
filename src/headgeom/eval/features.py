"""Frozen features at every point of the guillotine sweep (docs/paper.md §1, claim C12).

A *feature point* is a named place where a representation is read off the frozen model:

- ``"z"``: the backbone output z = f(x), shape (N, d);
- ``"<name>.<i>"``: the output of leaf module ``i`` of a head's flat ``layers`` Sequential
  (headgeom.heads.ProjectionHead), i.e. after each Linear, each norm (BatchNorm/LayerNorm),
  each activation and L2Normalize, in forward order. For the paper's projector
  ``512-2048-2048:relu:bn:last=bn`` the points are ``head.0`` (Linear), ``head.1`` (BN),
  ``head.2`` (ReLU), ``head.3`` (Linear), ``head.4`` (last BN), and the last point is h(z).
  Indices are the positions in ``head.layers``, so ``head.3`` is the output of the module
  whose parameters are ``layers.3.*`` in the state dict.

Several heads may be chained (projector, then predictor): each reads the previous head's
output, so ``pred.<i>`` points are p(h(z)) prefixes. A head without a flat ``layers``
Sequential (any other nn.Module or callable) contributes one point, its output.

docs/paper.md §4 pitfall 5: the paper fed L2-normalised z to a head trained on raw z. Both are
available: ``head_input="raw"`` (h(z), the trained map) and ``head_input="l2"`` (h(z/‖z‖),
the paper's variant); :func:`point_names` prefixes the latter's head points with ``l2z/``.

Extraction runs the modules in eval mode (BatchNorm running statistics; the previous
train/eval mode is restored afterwards), under ``torch.no_grad``, in batches, and returns
float32 CPU tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.data import ImageDataset

__all__ = ["HEAD_INPUTS", "Heads", "as_head_chain", "eval_mode", "extract_features", "feature_points",
           "head_features", "head_points", "image_batches", "point_modules", "point_names"]

HEAD_INPUTS = ("raw", "l2")
Heads = Mapping[str, Callable[[Tensor], Tensor]] | Sequence[tuple[str, Callable[[Tensor], Tensor]]]


def as_head_chain(heads: Heads | Callable[[Tensor], Tensor] | None) -> list[tuple[str, Callable]]:
    """Normalise ``heads`` to an ordered list of (name, module): None -> [], a module -> [("head", m)]."""
    if heads is None:
        return []
    if isinstance(heads, Mapping):
        chain = list(heads.items())
    elif callable(heads):
        chain = [("head", heads)]
    else:
        chain = [tuple(item) for item in heads]
    for item in chain:
        if len(item) != 2 or not isinstance(item[0], str) or not callable(item[1]):
            raise TypeError(f"heads must map names to modules, e.g. {{'head': projector, "
                            f"'pred': predictor}}; got the entry {item!r}")
        if not item[0] or "." in item[0] or "/" in item[0] or item[0] == "z":
            raise ValueError(f"head name {item[0]!r} is not usable as a point prefix; use a "
                             f"non-empty name without '.' or '/' other than 'z' (e.g. 'head')")
    names = [name for name, _ in chain]
    if len(set(names)) != len(names):
        raise ValueError(f"head names must be distinct, got {names}")
    return chain


def _layers(head: Callable) -> list[Callable] | None:
    layers = getattr(head, "layers", None)
    if isinstance(layers, nn.Sequential):
        return list(layers)
    if isinstance(head, nn.Sequential):
        return list(head)
    return None


def head_points(name: str, head: Callable) -> list[str]:
    """Point names of one head: ``name.i`` per leaf of its flat ``layers``, else ``name``."""
    layers = _layers(head)
    if layers is None:
        return [name]
    if not layers:
        raise ValueError(f"head {name!r} has an empty layers Sequential: no points to read")
    return [f"{name}.{i}" for i in range(len(layers))]


def point_names(heads: Heads | Callable | None = None,
                head_input: str | Sequence[str] = "raw") -> list[str]:
    """All point names in forward order: ``["z", "head.0", ..., "pred.0", ...]``.

    With ``head_input="l2"`` the head points are prefixed ``l2z/`` (``"l2z/head.0"``); ``"z"``
    is the same raw backbone output in both cases and listed once. A sequence such as
    ``("raw", "l2")`` lists the points of each variant in that order.
    """
    names = ["z"]
    chain = as_head_chain(heads)
    for variant in _head_inputs(head_input):
        prefix = "" if variant == "raw" else "l2z/"
        for name, head in chain:
            names += [prefix + p for p in head_points(name, head)]
    return names


def _head_inputs(head_input: str | Sequence[str]) -> list[str]:
    variants = [head_input] if isinstance(head_input, str) else list(head_input)
    for v in variants:
        if v not in HEAD_INPUTS:
            raise ValueError(f"head_input must be one of {HEAD_INPUTS} (raw z, or the paper's "
                             f"L2-normalised z, docs/paper.md §4 pitfall 5); got {v!r}")
    if not variants or len(set(variants)) != len(variants):
        raise ValueError(f"head_input needs distinct variants from {HEAD_INPUTS}, got {variants}")
    return variants


def _check_head_input(head_input: str) -> None:
    if head_input not in HEAD_INPUTS:
        raise ValueError(f"head_input must be one of {HEAD_INPUTS} (raw z, or the paper's "
                         f"L2-normalised z, docs/paper.md §4 pitfall 5); got {head_input!r}")


def point_modules(heads: Heads | Callable | None = None) -> dict[str, str]:
    """What each raw-input point reads: {"z": "backbone", "head.0": "Linear(512->2048)", ...}."""
    out = {"z": "backbone output"}
    for name, head in as_head_chain(heads):
        layers = _layers(head)
        if layers is None:
            out[name] = f"{type(head).__name__} output"
            continue
        for i, layer in enumerate(layers):
            desc = type(layer).__name__
            if isinstance(layer, nn.Linear):
                desc += f"({layer.in_features}->{layer.out_features})"
            elif isinstance(layer, nn.BatchNorm1d):
                desc += f"({layer.num_features})"
            elif isinstance(layer, nn.LayerNorm):
                desc += f"({', '.join(str(n) for n in layer.normalized_shape)})"
            out[f"{name}.{i}"] = desc
    return out


def feature_points(z: Tensor, heads: Heads | Callable | None = None,
                   head_input: str = "raw") -> dict[str, Tensor]:
    """Every point of the sweep for a batch of representations z (N, d); differentiable.

    Returns an ordered dict name -> (N, width); the last entry of each head is that head's
    output (for ProjectionHead: exactly ``head(z)``, since it is ``layers(z)``).
    """
    _check_head_input(head_input)
    prefix = "" if head_input == "raw" else "l2z/"
    out: dict[str, Tensor] = {"z": z}
    x = z if head_input == "raw" else F.normalize(z, dim=-1)
    for name, head in as_head_chain(heads):
        layers = _layers(head)
        if layers is None:
            x = head(x)
            out[prefix + name] = x
            continue
        expected = getattr(getattr(head, "spec", None), "in_dim", None)
        if expected is not None and x.shape[-1] != expected:
            raise ValueError(f"head {name!r} expects inputs with last dim {expected}, got "
                             f"shape {tuple(x.shape)} (is the head chain in forward order?)")
        for i, layer in enumerate(layers):
            x = layer(x)
            out[f"{prefix}{name}.{i}"] = x
    return out


def image_batches(images: Tensor, batch_size: int, device: torch.device | str,
                  mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
                  transform: Callable[[Tensor], Tensor] | None = None) -> Iterator[Tensor]:
    """uint8 (N, 3, H, W) -> float32 batches on ``device``: /255, ``transform`` on [0, 1]
    pixels, then (x - mean) / std when given (normalisation last, docs/paper.md §4 pitfall 6)."""
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise TypeError(f"images must be uint8 (N, 3, H, W), got {images.dtype} with shape "
                        f"{tuple(images.shape)}")
    if (mean is None) != (std is None):
        raise ValueError(f"give both mean and std or neither, got mean={mean}, std={std}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if mean is not None:
        m = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    for start in range(0, images.shape[0], batch_size):
        x = images[start:start + batch_size].to(device, non_blocking=True).float().div_(255.0)
        if transform is not None:
            x = transform(x)
        if mean is not None:
            x = (x - m) / s
        yield x


@contextmanager
def eval_mode(modules: Sequence[object]) -> Iterator[None]:
    """Switch every nn.Module to eval mode and restore each submodule's flag afterwards."""
    saved = [(m, m.training) for mod in modules if isinstance(mod, nn.Module)
             for m in mod.modules()]
    try:
        for mod in modules:
            if isinstance(mod, nn.Module):
                mod.eval()
        yield
    finally:
        for m, flag in saved:
            m.training = flag


def extract_features(backbone: Callable[[Tensor], Tensor], data: ImageDataset | Tensor,
                     heads: Heads | Callable | None = None, *,
                     head_input: str | Sequence[str] = "raw",
                     points: Sequence[str] | None = None, batch_size: int = 256,
                     device: torch.device | str = "cpu", mean: Sequence[float] | None = None,
                     std: Sequence[float] | None = None,
                     transform: Callable[[Tensor], Tensor] | None = None) -> dict[str, Tensor]:
    """Frozen features of ``data`` at each point: name -> float32 CPU tensor (N, width).

    Args:
        backbone: images (B, 3, H, W) -> z (B, d); run in eval mode with no grad.
        data: an ImageDataset or a uint8 image tensor (N, 3, H, W).
        heads: None (only ``"z"``), one head, or an ordered mapping name -> head (chained).
        head_input: ``"raw"`` (h(z)), ``"l2"`` (h(z/‖z‖), docs/paper.md §4 pitfall 5) or both,
            e.g. ``("raw", "l2")``, from one backbone pass.
        points: keep only these names (see :func:`point_names`); default all.
        mean, std: per-channel normalisation applied after ``transform`` (None: none, as
            the paper's collapse grid).
        transform: a map on [0, 1] float batches (e.g. a rotation), before normalisation.
    """
    images = data.images if isinstance(data, ImageDataset) else data
    if images.shape[0] == 0:
        raise ValueError("no images to extract features from (the dataset is empty)")
    all_names = point_names(heads, head_input)
    variants = _head_inputs(head_input)
    keep = list(all_names) if points is None else list(points)
    unknown = [p for p in keep if p not in all_names]
    if unknown:
        raise ValueError(f"unknown feature point(s) {unknown}; this model has {all_names}")
    chain = as_head_chain(heads)
    need_heads = bool(chain) and any(p != "z" for p in keep)
    parts: dict[str, list[Tensor]] = {p: [] for p in keep}
    with eval_mode([backbone] + [h for _, h in chain]), torch.no_grad():
        for x in image_batches(images, batch_size, device, mean, std, transform):
            z = backbone(x)
            if z.ndim != 2 or z.shape[0] != x.shape[0]:
                raise ValueError(f"backbone must return (B, d) features, got shape "
                                 f"{tuple(z.shape)} for a batch of {x.shape[0]} images")
            feats = {"z": z}
            for variant in variants if need_heads else ():
                feats.update(feature_points(z, chain, variant))
            for p in keep:
                parts[p].append(feats[p].float().cpu())
    return {p: torch.cat(parts[p]) for p in keep}


def head_features(z: Tensor, heads: Heads | Callable | None, point: str, *,
                  batch_size: int = 1024, device: torch.device | str = "cpu") -> Tensor:
    """Features at one ``point`` from stored backbone outputs z (N, d): float32 CPU (N, width).

    With z extracted once, each point can be computed, probed and dropped in turn, so memory
    holds z and one point at a time (an 8192-wide VICReg head has 7 points of 8192 dims).
    Heads run in eval mode under no_grad; ``"l2z/..."`` points feed the heads z/‖z‖.
    """
    if point == "z":
        return z
    chain = as_head_chain(heads)
    variant = "l2" if point.startswith("l2z/") else "raw"
    names = point_names(chain, variant)
    if point not in names:
        raise ValueError(f"unknown feature point {point!r}; this model has {names}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    parts = []
    with eval_mode([h for _, h in chain]), torch.no_grad():
        for start in range(0, z.shape[0], batch_size):
            zb = z[start:start + batch_size].to(device)
            parts.append(feature_points(zb, chain, variant)[point].float().cpu())
    return torch.cat(parts)
