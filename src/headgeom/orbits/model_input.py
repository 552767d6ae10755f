"""CHECKPOINT_OR_RUN -> backbone, heads and the input preprocessing of orbit analysis.

The preprocessing is a property of the model, decided here and recorded in every output
(docs/paper.md §3 "Pretrained", §4 pitfalls 6 and 10):

- ImageNet models (the official DINO / VICReg / Barlow Twins / SimSiam releases, any ResNet with
  the 7×7 ImageNet stem, a ViT whose position grid is for ≥ 96-px inputs): images resized to
  224 px (a ViT: its own ``img_size``), bilinear with antialiasing, on [0, 1] pixels *before* the
  orbit, and ImageNet mean/std applied *after* the augmentation.
- headgeom runs (``headgeom train --out RUN``, or its ``checkpoints/last.pt``): the run's own
  preprocessing: native size (or the run's ``image_size``) and, when the run normalised, its
  training set's mean/std, again after the augmentation.
- other backbones: a CIFAR-stem ResNet at the analysis data's native size, a small ViT at its own
  ``img_size``, both with the analysis dataset's mean/std.

``--normalization`` and ``--input-size`` override the choice; the reason is always stated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.checkpoints import load_checkpoint
from headgeom.data import DATASET_STATS, dataset_stats, load_dataset
from headgeom.runs.folder import missing_checkpoint_message

__all__ = ["IMAGENET_SIZE", "NORMALIZATIONS", "OFFICIAL_IMAGENET_RELEASES", "ModelInput",
           "prepare_images", "resolve_model"]

IMAGENET_SIZE = 224
NORMALIZATIONS = ("auto", "imagenet", "dataset", "none")
OFFICIAL_IMAGENET_RELEASES = ("dino_vit", "dino_resnet50", "vicreg", "barlow_twins", "simsiam")
# The paper's pretrained protocol (rotation 0-45°) for ImageNet models; its CIFAR orbits otherwise.
PRETRAINED_FAMILIES = ("rotation_45", "hue", "saturation", "blur")
CIFAR_FAMILIES = ("rotation", "hue", "saturation", "blur")
# Default image counts: the paper's 50 test images at 224 px for ImageNet models (a ResNet-50 pass
# there costs ~7x one at 32 px on a CIFAR ResNet-18), 200 otherwise.
PRETRAINED_IMAGES, CIFAR_IMAGES = 50, 200


@dataclass
class ModelInput:
    """A loaded model and how images must be prepared for it.

    backbone: (B, 3, size, size) normalised images -> (B, d); heads: name -> module, chained
    (``{"head": projector}``, plus ``"pred"`` with ``predictor=True``). ``size``: side the [0, 1]
    images are resized to before the orbit (None: the data's native size); ``mean``/``std``:
    normalisation after the augmentation (None: none). ``data``/``data_options``/``data_dir``:
    the default analysis data (a run's own dataset; cifar10 otherwise).
    """

    backbone: nn.Module
    heads: dict[str, nn.Module]
    kind: str  # "imagenet", "run" or "native"
    size: int | None
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    reason: str
    data: str
    data_options: dict[str, Any]
    data_dir: str | None
    source: dict[str, Any]
    default_families: tuple[str, ...]
    default_images: int = CIFAR_IMAGES
    notes: list[str] = field(default_factory=list)

    def preprocessing(self) -> dict[str, Any]:
        """JSON record of the input pipeline."""
        return {"kind": self.kind, "size": self.size,
                "resize": None if self.size is None else
                "bilinear, antialias, on [0, 1] pixels before the orbit",
                "mean": None if self.mean is None else list(self.mean),
                "std": None if self.std is None else list(self.std),
                "order": "resize, augment on [0, 1] pixels, then normalise (docs/paper.md §4 pitfall 6)",
                "reason": self.reason}


def prepare_images(images: Tensor, size: int | None) -> Tensor:
    """uint8 (N, 3, H, W) -> float32 [0, 1] pixels, resized to (size, size) when size is given.

    Bilinear with antialiasing (upsampling CIFAR to 224 px is plain bilinear), clamped to [0, 1]
    so the colour families see valid pixels.
    """
    if not isinstance(images, Tensor) or images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(f"images must be uint8 (N, 3, H, W), got "
                         f"{getattr(images, 'dtype', type(images).__name__)} "
                         f"{tuple(getattr(images, 'shape', ()))}")
    x = images.float().div_(255.0)
    if size is None or tuple(x.shape[-2:]) == (size, size):
        return x
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return x.clamp_(0.0, 1.0)


def _imagenet_reason(release: str, name: str, kwargs: dict[str, Any]) -> tuple[str | None, int | None]:
    """(why this is an ImageNet model, or None; its native input side)."""
    if name == "vit":
        side = int(kwargs.get("img_size", IMAGENET_SIZE))
        if release in OFFICIAL_IMAGENET_RELEASES:
            return f"official ImageNet release {release!r} (ViT for {side}-px inputs)", side
        if side >= 96:
            return f"ViT whose position grid is for {side}-px inputs (ImageNet-style)", side
        return None, side
    if release in OFFICIAL_IMAGENET_RELEASES:
        return f"official ImageNet release {release!r}", IMAGENET_SIZE
    if not kwargs.get("cifar_stem", False):
        return f"{name} with the ImageNet 7x7 stem", IMAGENET_SIZE
    return None, None


def _data_stats(name: str, options: dict[str, Any], data_dir: str | None) -> tuple[tuple, tuple]:
    """Published mean/std of ``name``, else measured on its train split (shapes, imagefolder)."""
    if name in DATASET_STATS:
        s = DATASET_STATS[name]
    else:
        s = dataset_stats(name, load_dataset(name, "train", data_dir, **options))
    return tuple(float(v) for v in s.mean), tuple(float(v) for v in s.std)


def resolve_model(path: str | os.PathLike[str], *, which: str | None = None,
                  num_heads: int | None = None, predictor: bool = False,
                  normalization: str = "auto", input_size: int | None = None,
                  data: str | None = None, data_dir: str | None = None,
                  data_options: dict[str, Any] | None = None) -> ModelInput:
    """Load ``path`` (checkpoint file or ``headgeom train`` run directory) for orbit analysis.

    ``data``/``data_dir``/``data_options`` name the analysis data (default: a run's own, else
    cifar10); ``normalization`` is one of :data:`NORMALIZATIONS`; ``input_size`` overrides the
    resize side (0 = native). Raises FileNotFoundError for a missing path, ValueError for bad
    options, and the checkpoint loaders' errors for refused or unreadable files.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    if input_size is not None and (isinstance(input_size, bool) or not isinstance(input_size, int)
                                   or input_size < 0):
        raise ValueError(f"input size must be a positive int (0 = native), got {input_size!r}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{missing_checkpoint_message(path)}: pass a checkpoint file (.pth, .pth.tar, "
                                f".pt) or a run directory written by `headgeom train --out RUN`")
    model = load_checkpoint(path, which=which, num_heads=num_heads)
    heads: dict[str, nn.Module] = {}
    if model.head is not None:
        heads["head"] = model.head
    if predictor:
        if model.predictor is None:
            raise ValueError(f"--predictor: {path} ({model.release}) holds no predictor")
        if model.head is None:
            raise ValueError(f"--predictor: {path} holds a predictor but no projector to chain it to")
        heads["pred"] = model.predictor
    source = {"path": str(path), **model.summary()}
    is_run = model.release.startswith("headgeom_")
    # where mean/std come from: ("imagenet",), (dataset, options, dir) or None; measured once below
    stats_from: tuple | None
    if is_run:
        tc = model.trained.settings
        kind, size, families = "run", tc.image_size, CIFAR_FAMILIES
        d_name = data or tc.data
        d_opts = dict(tc.data_options) if data is None else dict(data_options or {})
        d_dir = data_dir if data_dir is not None else (tc.data_dir if data is None else None)
        # the run's own normalisation (headgeom.runs.trained), measured only if nothing overrides it
        stats_from = ("run", {}, data_dir) if tc.normalize else None
        reason = (f"headgeom run ({tc.method}, {tc.backbone} {tc.backbone_options}) trained on "
                  f"{tc.data}: its own preprocessing, "
                  + (f"{tc.image_size}-px views" if tc.image_size else "native size")
                  + (f", {tc.data} mean/std" if tc.normalize else ", no normalisation (as trained)"))
        source["run_config"] = {"method": tc.method, "data": tc.data, "normalize": tc.normalize,
                                "image_size": tc.image_size}
    else:
        d_name, d_opts, d_dir = data or "cifar10", dict(data_options or {}), data_dir
        why, size = _imagenet_reason(model.release, model.backbone_name, model.backbone_kwargs)
        if why is not None:
            kind, families, stats_from = "imagenet", PRETRAINED_FAMILIES, ("imagenet", {}, None)
            reason = f"{why}: {size}-px inputs, ImageNet mean/std"
        else:
            kind, families, stats_from = "native", CIFAR_FAMILIES, (d_name, d_opts, d_dir)
            reason = (f"{model.backbone_name} with a CIFAR-style input ({model.release}): "
                      + (f"{size}-px inputs" if size else "native size")
                      + f", the analysis data's ({d_name}) mean/std")
    if normalization == "imagenet":
        stats_from = ("imagenet", {}, None)
        reason += "; normalisation overridden: ImageNet mean/std (--normalization imagenet)"
    elif normalization == "dataset":
        stats_from = (d_name, d_opts, d_dir)
        reason += f"; normalisation overridden: {d_name} mean/std (--normalization dataset)"
    elif normalization == "none":
        stats_from = None
        reason += "; normalisation overridden: none (--normalization none)"
    if stats_from is None:
        mean, std = None, None
    elif stats_from[0] == "run":
        mean, std = model.trained.normalisation(stats_from[2])
    else:
        mean, std = _data_stats(*stats_from)
    if input_size is not None:
        size = input_size or None
        reason += f"; input size overridden: {size or 'native'} (--input-size)"
    return ModelInput(backbone=model.backbone, heads=heads, kind=kind, size=size, mean=mean,
                      std=std, reason=reason, data=d_name, data_options=d_opts, data_dir=d_dir,
                      source=source, default_families=families,
                      default_images=PRETRAINED_IMAGES if kind == "imagenet" else CIFAR_IMAGES,
                      notes=list(model.notes))

