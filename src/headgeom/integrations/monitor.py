"""GeometryMonitor: the exact H_eff of a user's own model, measured inside any training loop.

    monitor = GeometryMonitor(head="projection_head", backbone="backbone", loss=my_loss,
                              probe=(x1, x2), every=100)
    for step, batch in enumerate(loader):
        ...                                               # the user's own training step
        if (m := monitor.step(model, step)) is not None:  # None between measurements
            print(step, m["headgeom/ambient/lambda_min"], m["headgeom/stats/rankme_z"])
            my_tracker.log(m, step=step)                  # ready for any tracker

A measurement names every number by its shared tag (:mod:`headgeom.tags`:
``headgeom/<reading>/lambda_min``, ``headgeom/<reading>/M_ratio_spectral``, ``headgeom/stats/rankme_z``,
...), the names native runs and the Lightning callback log them under: one name per quantity. The
keys of headgeom 0.2 (``lambda_min``, ``m_ratio``, ``rankme``, ...) still read the same numbers for
one release, with a DeprecationWarning (:class:`Measurement`).

A measurement is one call of :class:`headgeom.tracking.GeometryTracker` on the user's model
seen through the method protocol the tracker reads (``_Problem``):

1. z1, z2 = backbone(x1), backbone(x2) under no_grad, the backbone in eval mode;
2. v = head(z2) under no_grad in float64 (held fixed), the head in ``head_mode`` ("train" by
   default: the training loss, so a train-mode BatchNorm head uses the probe's batch statistics);
3. H_eff = G + M of z ↦ loss(head(z), v) at z = z1 from :func:`headgeom.geometry.effective_hessian`
   in float64: exact per-sample (d, d) blocks for a row-wise head (any loss, batch-coupled ones
   included), their spectrum with the relative floor (docs/paper.md §4, pitfall 2); a head that
   couples samples (train-mode BatchNorm) has no block-diagonal H_eff, so by default its
   extreme eigenvalues come from Lanczos on the whole operator (``coupled``);
4. RankMe, spread and covariance condition number of z1 and of head(z1)
   (:mod:`headgeom.eval.rankme`).

The model is left as it was: parameters are never written (the engine analyses a float64
copy of the head), every mode and buffer of backbone, head and loss is restored, and the RNG
states (torch CPU and CUDA, numpy, python ``random``) are forked. No collective runs: a
SyncBatchNorm of the head is analysed as a plain BatchNorm on a copy (each process's own
batch statistics), so one process may measure while the others train (the Lightning callback
measures on rank 0 only). The loss must be a pure function of (u, v) that runs under
``torch.func`` in float64 and gathers nothing across processes.
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, Mapping, Sequence, Union

import torch
from torch import Tensor, nn

from headgeom.geometry.engine.head_cache import HeadCache
from headgeom.geometry.engine.head_function import prepare_head
from headgeom.objectives.declared import AnalysisLoss
from headgeom.tags import MONITOR_HEFF, MONITOR_STATISTICS, tag
from headgeom.tracking.record import HeffReading, TrackingRecord
from headgeom.tracking.tracker import GeometryTracker

ModuleSpec = Union[nn.Module, str, Callable[[nn.Module], nn.Module]]
PairLoss = Callable[[Tensor, Tensor], Tensor]

# what measure() returns, by shared tag (<reading>: the monitor's reading, "ambient" or "tangential"; the
# operator path of a coupled head writes op_<field>); a key is absent when its value is undefined
KEYS = {
    "headgeom/<reading>/lambda_min / lambda_max": "extreme eigenvalues of H_eff of loss(head(z), v) w.r.t. "
    "z = backbone(x1), v = head(backbone(x2)) held fixed: over the exact per-sample (d, d) blocks (float64 "
    "eigh), or, for a head that couples samples (train-mode BatchNorm) with coupled='lanczos', of the whole "
    "operator (then headgeom/<reading>/op_lambda_min / op_lambda_max)",
    "headgeom/<reading>/n_negative": "eigenvalues < -floor, floor = rel_floor * max(max|lambda|, operand_scale) "
    "(blocks; the operator path only when its Krylov space was exact)",
    "headgeom/<reading>/frac_samples_negative": "fraction of per-sample blocks with an eigenvalue < -floor "
    "(blocks only)",
    "headgeom/<reading>/floor": "the floor used; 0 means H_eff vanished on the probe (a dead head), not 'no "
    "negative curvature'",
    "headgeom/<reading>/operand_scale": "S = 1.1 * max_i |A_i|_2 |J_i|_2^2, the scale of the terms G is summed "
    "from (headgeom.geometry.engine.operand_scale): the floor is relative to it when it exceeds max|lambda|, so that "
    "round-off left by their cancellation is not read as curvature",
    "headgeom/<reading>/M_ratio_spectral": "|M|_2 / |H_eff|_2, spectral norms of the block-diagonal matrices "
    "(or of the whole operator)",
    "headgeom/<reading>/M_ratio_fro": "|M|_F / |H_eff|_F of the block-diagonal matrices (blocks only)",
    "headgeom/<reading>/op_converged / op_iterations": "the operator path's Lanczos run (coupled heads only)",
    "headgeom/stats/rankme_z / rankme_projector": "RankMe (Garrido et al. 2023, eps 1e-7) of z1 = backbone(x1) "
    "/ of head(z1)",
    "headgeom/stats/spread_z / spread_projector": "mean per-dimension std (ddof=1) of the L2-normalised rows "
    "of z1 / of head(z1)",
    "headgeom/stats/cov_condition_z / cov_condition_projector": "condition number of the sample covariance of "
    "z1 / of head(z1) over eigenvalues > cov_rel_tol * lambda_max (its covariance, not H_eff's); "
    "cov_rank_z / cov_rank_projector: their count",
}


class Measurement(dict):
    """What :meth:`GeometryMonitor.measure` returns: ``{shared tag: float}`` (:mod:`headgeom.tags`),
    e.g. ``m["headgeom/ambient/lambda_min"]``, ready for any tracker's ``log``.

    Deprecated, for one release: reading a key of headgeom 0.2 (``m["lambda_min"]``, ``m["m_ratio"]``,
    ``m["rankme"]``, ...: ``headgeom.tags.MONITOR_HEFF`` / ``MONITOR_STATISTICS``) returns the number of
    its tag (``aliases``: old key -> tag) with a DeprecationWarning; iteration, ``in`` and ``len`` see
    the tags only."""

    def __init__(self, values: Mapping[str, float], aliases: Mapping[str, str]) -> None:
        super().__init__(values)
        self.aliases = {old: new for old, new in aliases.items() if new in values}

    def __missing__(self, key: Any) -> float:
        new = self.aliases.get(key) if isinstance(key, str) else None
        if new is None:
            raise KeyError(key)
        warnings.warn(f"GeometryMonitor key {key!r} is deprecated (removed in headgeom 0.4): read {new!r}, the "
                      "shared tag every logger uses for it (headgeom.tags)", DeprecationWarning, stacklevel=2)
        return dict.__getitem__(self, new)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def measurement(record: TrackingRecord) -> Measurement:
    """The monitor's numbers of the tracker's ``record`` under their shared tags (the tag of the
    metrics.jsonl key a native run writes for the same field); undefined values left out."""
    (heff,) = record.heff
    prefix = HeffReading.prefix(heff.reading, heff.reduction, heff.source)
    values: dict[str, float] = {}
    aliases: dict[str, str] = {}
    for group, names, key_prefix in ((heff, MONITOR_HEFF, prefix), (record.statistics, MONITOR_STATISTICS, "")):
        for field, old in names.items():
            value = getattr(group, field)
            if value is not None:
                values[tag(key_prefix + field)] = value
                aliases[old] = tag(key_prefix + field)
    return Measurement(values, aliases)


class _LocalBatchNorm(nn.BatchNorm1d):
    """SyncBatchNorm's computation on one process: batch statistics of the local batch only."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")


def _without_sync_batchnorm(head: nn.Module) -> nn.Module:
    """``head`` itself, or a copy whose SyncBatchNorm layers are plain BatchNorm (same values and
    mode): a train-mode SyncBatchNorm would all-gather with processes that are not measuring."""
    if not any(isinstance(m, nn.SyncBatchNorm) for m in head.modules()):
        return head
    work = copy.deepcopy(head)

    def local(module: nn.Module) -> nn.Module:
        if not isinstance(module, nn.SyncBatchNorm):
            for name, child in module.named_children():
                setattr(module, name, local(child))
            return module
        bn = _LocalBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                             module.track_running_stats, device="meta")
        bn.weight, bn.bias = module.weight, module.bias
        bn.running_mean, bn.running_var = module.running_mean, module.running_var
        bn.num_batches_tracked = module.num_batches_tracked
        return bn.train(module.training)

    return local(work)


def _resolve(spec: ModuleSpec, model: nn.Module | None, what: str) -> nn.Module:
    """The module ``spec`` names: itself, an attribute path of ``model`` ("encoder.head") or
    what a callable returns for ``model``."""
    if isinstance(spec, nn.Module):
        return spec
    if model is None:
        raise ValueError(f"{what}={spec!r} is resolved on the model: pass the model to measure(model)")
    if isinstance(spec, str):
        found: Any = model
        for part in spec.split("."):
            if not hasattr(found, part):
                children = sorted(name for name, _ in found.named_children()) if isinstance(found, nn.Module) else []
                raise AttributeError(f"{what}={spec!r}: {type(found).__name__} has no attribute {part!r} "
                                     f"(its submodules: {children}); pass the attribute name or a callable model -> module")
            found = getattr(found, part)
    else:
        found = spec(model)
    if not isinstance(found, nn.Module):
        raise TypeError(f"{what}={spec!r} gave {type(found).__name__}, not an nn.Module; pass a module, an "
                        "attribute name of the model, or a callable model -> module")
    return found


def _rows(z: Any, what: str) -> Tensor:
    """(N, d) features; (N, d, 1, 1) (a pooled CNN output, as lightly's backbones give) is flattened."""
    if isinstance(z, Tensor) and z.ndim > 2 and all(s == 1 for s in z.shape[2:]):
        z = z.flatten(1)
    if not isinstance(z, Tensor) or z.ndim != 2:
        raise ValueError(f"the {what} must give one (N, d) feature row per sample; got "
                         f"{tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__}. Pass a {what} "
                         "callable model -> module whose output is (N, d) (e.g. the ViT's CLS token)")
    return z


class _Problem(nn.Module):
    """A user's backbone, head and pair loss in the method protocol GeometryTracker measures:
    ``forward(views) -> {"z": [z1, z2]}``, ``geometry_problem(z_views) -> (head, u ↦ loss(u, v))``
    with v = head(z2) computed like u, on the analysis copy of the head in ``dtype``."""

    def __init__(self, backbone: nn.Module, head: nn.Module, loss: PairLoss, dtype: torch.dtype,
                 cache: HeadCache) -> None:
        super().__init__()
        self.backbone, self.projector, self.loss, self.dtype = backbone, head, loss, dtype
        self.head_cache = cache  # the tracker's: v and the analysis use the same analysis copy

    def forward(self, views: Sequence[Tensor]) -> dict[str, list[Tensor]]:
        return {"z": [_rows(self.backbone(x), "backbone") for x in views]}

    def geometry_problem(self, z_views: Sequence[Tensor]):
        z2 = z_views[1]
        with torch.no_grad():
            prepared = prepare_head(self.projector, self.dtype, z2.device, self.head_cache)
            other = _rows(prepared.fn(z2.to(self.dtype)), "head")
        return self.projector, AnalysisLoss.against(self.loss, other)


class GeometryMonitor:
    """Exact head geometry of a user's model every ``every`` steps on a fixed probe batch.

    Args:
        head, backbone: an nn.Module, the attribute name (or dotted path) of one on the model,
            or a callable model -> nn.Module, resolved at every measurement (e.g.
            ``lambda m: nn.Sequential(m.projection_head, m.prediction_head)``). The backbone maps
            a view batch to (N, d) ((N, d, 1, 1) is flattened), the head (N, d) to (N, k).
        loss: ``loss(u, v) -> scalar``, the user's loss with u the analysed view's head output
            (N, k) and v the other view's head output, held fixed.
        probe: the fixed probe batch, two views (x1, x2) of the same N ≥ 2 samples.
        reading: loss-Hessian reading of G: "ambient" (the exact Hessian of the loss as given,
            right for any loss) or "tangential" (cosine losses: the Riemannian Hessian on the
            sphere, unchanged by the scale of the head output) (docs/paper.md §1).
        every: ``step`` measures at steps with ``step % every == 0``.
        **options: the other settings of :class:`headgeom.tracking.GeometryTracker`
            (reduction, rel_floor, dtype, head_mode, coupled, block_samples, lanczos_*,
            cov_rel_tol, chunk_size).
    """

    def __init__(self, head: ModuleSpec, backbone: ModuleSpec, loss: PairLoss,
                 probe: Sequence[Tensor], reading: str = "ambient", every: int = 1, **options: Any) -> None:
        for what, spec in (("head", head), ("backbone", backbone)):
            if not (isinstance(spec, (nn.Module, str)) or callable(spec)):
                raise TypeError(f"{what} must be an nn.Module, an attribute name or a callable model -> module; "
                                f"got {type(spec).__name__}")
        if not callable(loss):
            raise TypeError(f"loss must be a callable loss(u, v) -> scalar tensor; got {type(loss).__name__}")
        if isinstance(probe, Tensor) or not isinstance(probe, (list, tuple)) or len(probe) != 2:
            raise ValueError("probe must be two views (x1, x2) of the same samples, each a batch (N, ...); got "
                             + (f"a sequence of {len(probe)}" if isinstance(probe, (list, tuple)) else type(probe).__name__))
        unknown = {"probe_views", "updates"} & set(options)
        if unknown:
            raise TypeError(f"GeometryMonitor sets {sorted(unknown)} itself; pass the probe as probe=(x1, x2)")
        self.head, self.backbone, self.loss = head, backbone, loss
        self.tracker = GeometryTracker(probe_views=list(probe), every=every, reading=reading,
                                       updates=False, **options)

    @property
    def every(self) -> int:
        return self.tracker.every

    def due(self, step: int) -> bool:
        """True at the steps ``step`` measures (step % every == 0)."""
        return self.tracker.due(step)

    def step(self, model: nn.Module | None, step: int) -> Measurement | None:
        """:meth:`measure` at steps ``step % every == 0``; None (and no work) otherwise."""
        return self.measure(model) if self.due(step) else None

    def measure(self, model: nn.Module | None = None) -> Measurement:
        """The geometry of the model now under the shared tags (``headgeom/<reading>/lambda_min``, ...;
        definitions in ``KEYS``; float64 values), ready for any tracker's ``log(...)``."""
        return measurement(self.record(model))

    def tagged(self, model: nn.Module | None = None) -> dict[str, float]:
        """Deprecated (removed in headgeom 0.4): :meth:`measure`, which now returns the shared tags."""
        warnings.warn("GeometryMonitor.tagged() is deprecated (removed in headgeom 0.4): measure() returns the "
                      "same numbers under the same shared tags", DeprecationWarning, stacklevel=2)
        return dict(self.measure(model))

    def record(self, model: nn.Module | None = None) -> TrackingRecord:
        """The tracker's record of the model now (:meth:`measure` and :meth:`tagged` read it)."""
        backbone = _resolve(self.backbone, model, "backbone")
        head = _without_sync_batchnorm(_resolve(self.head, model, "head"))
        problem = _Problem(backbone, head, self.loss, self.tracker.dtype, self.tracker.head_cache)
        first = next(problem.parameters(), None)
        device = first.device if first is not None else torch.device("cpu")
        with torch.autocast(device.type, enabled=False):  # measured in full precision under AMP too
            return self.tracker.measure(0, problem)

    @property
    def last_info(self) -> dict[str, Any]:
        """The engine's record of the last measurement (path, sizes, reading) and its seconds."""
        return self.tracker.last_info

    def metadata(self) -> dict[str, Any]:
        """The settings and the definitions of every key (JSON-serialisable)."""
        return {**self.tracker.metadata(), "keys": dict(KEYS)}
