"""Each SSL method's standard augmentation recipe, as batched on-device ops.

A :class:`Recipe` maps a batch ``(N, 3, H, W)`` in [0, 1] and a generator to a tuple of
views. Normalisation is off unless ``mean``/``std`` are given, and is then the last step
of every view (docs/paper.md §4, pitfall 6). Builders take the output ``size`` and are
registered by name in :data:`RECIPES`; :func:`get_recipe` builds one.

Differences from the official PIL pipelines, common to all recipes: resizing is bilinear
without antialiasing (the official code uses bicubic PIL resampling); the blur is a
truncated Gaussian covering ±3σ (PIL's GaussianBlur(radius=σ) in BYOL/DINO/VICReg/Barlow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from headgeom.augment.random_ops import (
    ColorJitter,
    Compose,
    GaussianBlur,
    Normalize,
    Op,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    Solarization,
)

Tensor = torch.Tensor

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Recipe:
    """Named multi-view augmentation: ``recipe(x, generator) -> (view_1, ..., view_V)``.

    Each entry of ``views`` is ``op(x, generator)`` returning one view or a list of views.
    """

    name: str
    views: tuple[Op, ...]
    source: str = ""
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "views", tuple(self.views))
        if (self.mean is None) != (self.std is None):
            raise ValueError(f"give both mean and std or neither, got mean={self.mean}, std={self.std}")

    def __call__(self, x: Tensor, generator: torch.Generator) -> tuple[Tensor, ...]:
        out: list[Tensor] = []
        for view in self.views:  # a view may emit several (DINO's MultiCrop returns a list)
            y = view(x, generator)
            out.extend(y if isinstance(y, (list, tuple)) else [y])
        if self.mean is not None:
            norm = Normalize(tuple(self.mean), tuple(self.std))
            out = [norm(v) for v in out]
        return tuple(out)


def _byol_style(size: int, scale: tuple[float, float] = (0.08, 1.0)) -> tuple[Compose, Compose]:
    """BYOL Table 6 (also VICReg and Barlow Twins official code): asymmetric blur/solarisation."""
    common = (RandomResizedCrop(size, scale=scale), RandomHorizontalFlip(0.5),
              ColorJitter(0.4, 0.4, 0.2, 0.1, p=0.8), RandomGrayscale(0.2))
    return (Compose(common + (GaussianBlur(p=1.0), Solarization(p=0.0))),
            Compose(common + (GaussianBlur(p=0.1), Solarization(p=0.2))))


def simclr(size: int, **kw) -> Recipe:
    """SimCLR, CIFAR variant (Chen et al. 2020, App. B.9; official repo ``data_util.py``).

    Crop (0.08, 1), flip 0.5, colour jitter strength 0.5 = (0.4, 0.4, 0.4, 0.1) with p = 0.8,
    grayscale 0.2; the ImageNet recipe's Gaussian blur is off for CIFAR.
    """
    view = Compose((RandomResizedCrop(size, scale=(0.08, 1.0)), RandomHorizontalFlip(0.5),
                    ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8), RandomGrayscale(0.2)))
    return Recipe("simclr", (view, view), "Chen et al. 2020, SimCLR, CIFAR-10 augmentation", **kw)


def paper_simclr(size: int, **kw) -> Recipe:
    """The paper's SimCLR for the guillotine/orbit runs (docs/paper.md §3).

    "crop (0.08, 1), flip, rotation 45°, colour jitter (0.4, 0.4, 0.4, 0.1) p=0.8"; no
    grayscale or blur is listed, so none is applied. Rotation is U(-45°, 45°), zeros padding.
    """
    view = Compose((RandomResizedCrop(size, scale=(0.08, 1.0)), RandomHorizontalFlip(0.5),
                    RandomRotation(45.0), ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8)))
    return Recipe("paper_simclr", (view, view), "docs/paper.md §3, SimCLR for guillotine/orbits", **kw)


def paper_simsiam(size: int, **kw) -> Recipe:
    """The paper's collapse-grid SimSiam (docs/paper.md §3): "crop scale (0.2, 1) + flip, no normalisation"."""
    view = Compose((RandomResizedCrop(size, scale=(0.2, 1.0)), RandomHorizontalFlip(0.5)))
    return Recipe("paper_simsiam", (view, view), "docs/paper.md §3, collapse grid", **kw)


def simsiam(size: int, **kw) -> Recipe:
    """SimSiam (Chen & He 2021, official ``main_simsiam.py``), in the official order:

    crop (0.2, 1), jitter (0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale 0.2, blur σ ∈ [0.1, 2] p = 0.5, flip.
    """
    view = Compose((RandomResizedCrop(size, scale=(0.2, 1.0)), ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8),
                    RandomGrayscale(0.2), GaussianBlur(p=0.5, sigma=(0.1, 2.0)), RandomHorizontalFlip(0.5)))
    return Recipe("simsiam", (view, view), "Chen & He 2021, SimSiam, ImageNet augmentation", **kw)


def byol(size: int, **kw) -> Recipe:
    """BYOL (Grill et al. 2020, Table 6): crop (0.08, 1), flip, jitter (0.4, 0.4, 0.2, 0.1) p = 0.8,
    grayscale 0.2; blur p = 1.0 / 0.1 and solarisation p = 0.0 / 0.2 on views 1 / 2."""
    return Recipe("byol", _byol_style(size), "Grill et al. 2020, BYOL, Table 6", **kw)


def vicreg(size: int, **kw) -> Recipe:
    """VICReg (Bardes et al. 2022, official ``augmentations.py``): BYOL's asymmetric recipe."""
    return Recipe("vicreg", _byol_style(size), "Bardes et al. 2022, VICReg, App. C", **kw)


def barlow_twins(size: int, **kw) -> Recipe:
    """Barlow Twins (Zbontar et al. 2021, official ``main.py`` Transform): BYOL's asymmetric recipe."""
    return Recipe("barlow_twins", _byol_style(size), "Zbontar et al. 2021, Barlow Twins", **kw)


def _dino_flip_color() -> tuple[Op, ...]:
    return (RandomHorizontalFlip(0.5), ColorJitter(0.4, 0.4, 0.2, 0.1, p=0.8), RandomGrayscale(0.2))


@dataclass(frozen=True)
class MultiCrop:
    """DINO multi-crop (Caron et al. 2021, official ``DataAugmentationDINO``).

    Returns ``[global_1, global_2, local_1, ..., local_n]``: globals (N, 3, G, G) with crop
    scale ``global_scale``, locals (N, 3, L, L) with ``local_scale``. Default post-crop ops are
    DINO's: flip + jitter (0.4, 0.4, 0.2, 0.1) p = 0.8 + grayscale 0.2, then blur p = 1.0 on
    global 1, blur 0.1 + solarisation 0.2 on global 2, blur 0.5 on locals.
    """

    global_size: int
    local_size: int
    n_local: int = 8
    global_scale: tuple[float, float] = (0.4, 1.0)
    local_scale: tuple[float, float] = (0.05, 0.4)
    global_ops: tuple[Sequence[Op], Sequence[Op]] | None = None
    local_ops: Sequence[Op] | None = None
    _pipelines: tuple[Compose, Compose, Compose] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.n_local < 0:
            raise ValueError(f"n_local must be >= 0, got {self.n_local}")
        fc = _dino_flip_color()
        dino_globals = (fc + (GaussianBlur(p=1.0),), fc + (GaussianBlur(p=0.1), Solarization(p=0.2)))
        g1, g2 = self.global_ops or dino_globals
        loc = self.local_ops if self.local_ops is not None else fc + (GaussianBlur(p=0.5),)
        gcrop = RandomResizedCrop(self.global_size, scale=self.global_scale)
        lcrop = RandomResizedCrop(self.local_size, scale=self.local_scale)
        pipes = (Compose((gcrop, *g1)), Compose((gcrop, *g2)), Compose((lcrop, *loc)))
        object.__setattr__(self, "_pipelines", pipes)

    def __call__(self, x: Tensor, generator: torch.Generator) -> list[Tensor]:
        g1, g2, loc = self._pipelines
        return [g1(x, generator), g2(x, generator)] + [loc(x, generator) for _ in range(self.n_local)]


def dino(size: int, local_size: int | None = None, n_local: int = 8,
         global_scale: tuple[float, float] = (0.4, 1.0), local_scale: tuple[float, float] = (0.05, 0.4),
         **kw) -> Recipe:
    """DINO multi-crop recipe: 2 globals at ``size`` and ``n_local`` locals at ``local_size``
    (default ``round(size * 96 / 224)``, DINO's 224/96 proportion)."""
    ls = local_size if local_size is not None else max(1, round(size * 96 / 224))
    mc = MultiCrop(size, ls, n_local, global_scale, local_scale)
    return Recipe("dino", (mc,), "Caron et al. 2021, DINO multi-crop", **kw)


RECIPES: dict[str, Callable[..., Recipe]] = {
    "simclr": simclr,
    "paper_simclr": paper_simclr,
    "paper_simsiam": paper_simsiam,
    "simsiam": simsiam,
    "byol": byol,
    "vicreg": vicreg,
    "barlow_twins": barlow_twins,
    "dino": dino,
}


def get_recipe(name: str, size: int, **kwargs) -> Recipe:
    """Build the recipe ``name`` for output side ``size``; kwargs go to the builder
    (``mean``/``std`` for normalisation, DINO's ``local_size``/``n_local``/scales)."""
    if name not in RECIPES:
        raise ValueError(f"unknown augmentation recipe {name!r}; available: {sorted(RECIPES)}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a positive int (output side in pixels), got {size!r}")
    return RECIPES[name](size, **kwargs)
