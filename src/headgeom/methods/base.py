"""SSLMethod: the common body of the six SSL methods (the interface of docs/design.md#method-interface).

A method owns a backbone f (images -> z, (N, d)), a projector h (z -> u, (N, k)) and, for
SimSiam/BYOL, a predictor q (u -> p). Every view is encoded separately, so BatchNorm layers
normalise each view with its own batch statistics (as the official SimSiam, VICReg and
Barlow Twins code does) and the geometry head applied to z1 alone matches training.

Subclasses set ``name``, ``DEFAULTS`` (hyper-parameters), ``RECIPE``, ``OBJECTIVE`` (the name of
their objective in :data:`headgeom.objectives.OBJECTIVES`), the default heads and implement
``forward`` (and ``geometry_problem`` where view 1 does not enter through the projector alone against
the other view's projector output); stateful parts (EMA target, DINO centre) are submodules, so
``state_dict`` holds them. The loss a ``geometry_problem`` returns is built from the objective's
spec (:meth:`SSLMethod.analysis_loss`), which declares its closed-form Hessian.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ClassVar, Iterator, Sequence

import torch
from torch import Tensor, nn

from headgeom.augment.recipes import Recipe, get_recipe
from headgeom.heads import HeadSpec
from headgeom.methods.spec import MethodSpec
from headgeom.objectives.declared import AnalysisLoss
from headgeom.objectives.registry import get_objective
from headgeom.objectives.spec import ObjectiveSpec

@contextlib.contextmanager
def preserve_buffers(*modules: nn.Module | None) -> Iterator[None]:
    """Restore every buffer (BatchNorm running statistics) of ``modules`` on exit.

    Used to evaluate the other views' branch for ``geometry_problem`` in train mode without
    changing the method's state.
    """
    saved = [(b, b.detach().clone()) for m in modules if m is not None for b in m.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, value in saved:
                b.copy_(value)


def upcast(t: Tensor) -> Tensor:
    """float16 / bfloat16 -> float32; other dtypes unchanged (float64 stays float64)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def full_precision(fn: Callable[..., Any], *tensors: Any) -> Any:
    """fn(*tensors) with autocast off and half-precision tensors (or lists of them) upcast.

    Under bf16/fp16 autocast the backbone and heads run in low precision, but the
    objectives (normalisations, log-sum-exp, D×D correlation matrices) run in float32:
    bf16's 8-bit mantissa is too coarse for VICReg's covariance or Barlow's c_ij.
    """
    args = [[upcast(x) for x in t] if isinstance(t, (list, tuple)) else upcast(t) for t in tensors]
    first = args[0][0] if isinstance(args[0], list) else args[0]
    with torch.autocast(device_type=first.device.type, enabled=False):
        return fn(*args)


def cached_targets(method: "SSLMethod", cache: tuple | None, z1: Tensor) -> tuple:
    """What the last forward stored after its z1 (EMA targets, DINO teacher outputs, centre,
    temperature), after checking that ``z1`` is that forward's first representation batch."""
    how = (f"call out = method(views) on the probe views first and pass out['z'] to "
           f"{method.name}.geometry_problem")
    if cache is None:
        raise RuntimeError(f"{method.name}.geometry_problem needs the EMA network's outputs on the same views; {how}")
    z_ref, rest = cache[0], cache[1:]
    z1 = z1.detach()
    same = z1.shape == z_ref.shape and torch.allclose(
        z1.to(device=z_ref.device, dtype=z_ref.dtype), z_ref, rtol=1e-4, atol=1e-5)
    if not same:
        raise RuntimeError(
            f"{method.name}.geometry_problem got z_views that are not those of the last forward "
            f"(shape {tuple(z1.shape)} vs {tuple(z_ref.shape)}, or different values); {how}"
        )
    return rest


def no_decay(name: str, p: Tensor) -> bool:
    """Biases and norm parameters take no weight decay (DINO's get_params_groups rule:
    name ends with '.bias' or the parameter is 1-D; the same set as the official
    SimCLR/BYOL/VICReg/Barlow Twins exclusions)."""
    return name.endswith(".bias") or p.ndim <= 1


class SSLMethod(nn.Module):
    """Base class; build methods with :func:`headgeom.methods.build_method`."""

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    RECIPE: ClassVar[str] = ""
    HAS_PREDICTOR: ClassVar[bool] = False
    N_VIEWS: ClassVar[int | None] = 2  # exact number of views, None for "at least 2" (DINO)
    DESCRIPTION: ClassVar[str] = ""
    OBJECTIVE: ClassVar[str] = ""  # its name in headgeom.objectives.OBJECTIVES

    def __init__(self, backbone: nn.Module, projector: nn.Module, predictor: nn.Module | None,
                 spec: MethodSpec) -> None:
        super().__init__()
        self.backbone = backbone
        self.projector = projector
        self.predictor = predictor
        self.spec = spec
        self.options: dict[str, Any] = dict(spec.options)

    # ---- defaults -------------------------------------------------------------------------
    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        raise NotImplementedError

    @classmethod
    def default_predictor(cls, in_dim: int) -> HeadSpec | None:
        return None

    # ---- forward helpers ------------------------------------------------------------------
    def check_views(self, views: Sequence[Tensor]) -> list[Tensor]:
        """Raise unless ``views`` is a list/tuple of (N, C, H, W) batches of one batch size."""
        if isinstance(views, Tensor) or not isinstance(views, (list, tuple)):
            raise TypeError(
                f"{self.name} expects views as a list or tuple of image batches (N, 3, H, W); got "
                f"{type(views).__name__}. Use the method's recipe: views = method.recipe(size)(x, gen)"
            )
        views = list(views)
        need = self.N_VIEWS
        if (need is not None and len(views) != need) or len(views) < 2:
            what = f"exactly {need}" if need is not None else "at least 2"
            raise ValueError(f"{self.name} needs {what} views; got {len(views)}")
        for i, v in enumerate(views):
            if not isinstance(v, Tensor) or v.ndim != 4:
                raise ValueError(
                    f"view {i} must be an image batch (N, C, H, W); got "
                    f"{tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__}"
                )
            if v.shape[0] != views[0].shape[0]:
                raise ValueError(
                    f"every view must hold the same samples; view 0 has batch {views[0].shape[0]}, "
                    f"view {i} has {v.shape[0]}"
                )
        return views

    def encode(self, views: Sequence[Tensor]) -> list[Tensor]:
        """Backbone representations z_v = f(view_v), one (N, d) per view."""
        return [self.backbone(v) for v in views]

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        """{"loss": scalar, "z": [(N, d) per view], "logs": {name: float or 0-d tensor}}; the
        loop converts logs to float only on the steps it records, so a tensor costs no sync."""
        raise NotImplementedError

    def before_optimizer_step(self, step: int, epoch: int) -> None:
        """Called after ``loss.backward()`` and before ``optimizer.step()`` with the 0-based step
        and epoch; may edit gradients (DINO's ``freeze_last_layer``); no-op here."""

    def on_step_end(self, step: int, total_steps: int) -> None:
        """Called after ``optimizer.step()`` with the 0-based index of that step; no-op here."""

    def recipe(self, size: int, **kwargs: Any) -> Recipe:
        """The method's standard augmentation (``kwargs``: mean/std and recipe options)."""
        return get_recipe(self.options.get("recipe") or self.RECIPE, size, **kwargs)

    # ---- geometry -------------------------------------------------------------------------
    @classmethod
    def objective(cls) -> ObjectiveSpec:
        """The spec of the method's objective (``OBJECTIVE``): the loss and its closed-form Hessian."""
        if not cls.OBJECTIVE:
            raise NotImplementedError(f"{cls.__name__} names no OBJECTIVE (a key of headgeom.objectives.OBJECTIVES): "
                                      "set it, or implement geometry_problem")
        return get_objective(cls.OBJECTIVE)

    def analysis_loss(self, other: Tensor, **options: Any) -> AnalysisLoss:
        """u ↦ the objective of u against ``other`` (N, k), held fixed, with the method's values of the
        objective's hyper-parameters (``options`` override them), declaring the spec's closed forms."""
        spec = self.objective()
        values = {k: self.options[k] for k in spec.options if k in self.options}
        return spec.analysis_loss(other, **{**values, **options})

    def geometry_problem(self, z_views: Sequence[Tensor]) -> tuple[nn.Module | Callable, AnalysisLoss]:
        """(head, loss) such that loss(head(z_views[0])) is the training loss as a function of
        view 1's representation with everything else constant (docs/paper.md §3, Hessian tracking).

        Here: the projector, and the objective of its output against view 2's projector output
        (computed without gradient or buffer updates), for methods whose loss is
        ``objective(h(z1), h(z2))`` (SimCLR, VICReg, Barlow Twins)."""
        (u2,) = self._other_outputs(z_views[:2], self.projector)
        return self.projector, self.analysis_loss(u2)

    def _other_outputs(self, z_views: Sequence[Tensor], module: nn.Module) -> list[Tensor]:
        """module(z) for every view but the first, without gradient or buffer updates."""
        self._check_z(z_views)
        with torch.no_grad(), preserve_buffers(module):
            return [module(z.detach()) for z in z_views[1:]]

    def _check_z(self, z_views: Sequence[Tensor]) -> None:
        if isinstance(z_views, Tensor) or not isinstance(z_views, (list, tuple)) or len(z_views) < 2:
            raise ValueError(
                f"{self.name}.geometry_problem needs a list of at least 2 representation batches "
                f"(N, d), one per view (out['z']); got {type(z_views).__name__}"
                + (f" of length {len(z_views)}" if isinstance(z_views, (list, tuple)) else "")
            )
        d = self.spec.feature_dim
        for i, z in enumerate(z_views):
            if not isinstance(z, Tensor) or z.ndim != 2 or z.shape[1] != d:
                raise ValueError(
                    f"z_views[{i}] must have shape (N, {d}) (the backbone's feature dim); got "
                    f"{tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__}"
                )

    # ---- optimisation ---------------------------------------------------------------------
    def online_modules(self) -> dict[str, nn.Module]:
        """The trained networks by name (EMA targets and teachers are not among them)."""
        out = {"backbone": self.backbone, "projector": self.projector}
        if self.predictor is not None:
            out["predictor"] = self.predictor
        return out

    def param_groups(self, weight_decay: float) -> list[dict[str, Any]]:
        """[{"name": "decay", ...}, {"name": "no_decay", weight_decay 0}] over trainable online
        parameters; biases and norm parameters (1-D) are excluded from decay."""
        if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or weight_decay < 0:
            raise ValueError(f"weight_decay must be a number >= 0; got {weight_decay!r}")
        decay: list[Tensor] = []
        keep: list[Tensor] = []
        for prefix, module in self.online_modules().items():
            for name, p in module.named_parameters(prefix=prefix):
                if p.requires_grad:
                    (keep if no_decay(name, p) else decay).append(p)
        return [
            {"name": "decay", "params": decay, "weight_decay": float(weight_decay)},
            {"name": "no_decay", "params": keep, "weight_decay": 0.0},
        ]

    def head_parameters(self) -> Iterator[Tensor]:
        """Trainable projector (and predictor) parameters."""
        for key in ("projector", "predictor"):
            module = self.online_modules().get(key)
            if module is not None:
                yield from (p for p in module.parameters() if p.requires_grad)

    def backbone_parameters(self) -> Iterator[Tensor]:
        """Trainable backbone parameters."""
        yield from (p for p in self.backbone.parameters() if p.requires_grad)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, head={self.spec.head!r}, predictor={self.spec.predictor!r}"
