"""GeometryTracker: H_eff spectra and representation statistics on a fixed probe batch during training.

docs/paper.md §3 ("Hessian tracking", the collapse grid's tracked quantities) and §4.
``tracker.measure(step, method, probe_views)`` returns a
:class:`~headgeom.tracking.record.TrackingRecord`; the training loop calls
``tracker(step, method, probe_views)``, which gives that record's flat metrics.jsonl keys
(:meth:`TrackingRecord.metrics`) at the steps it is due, and logs them once (the method follows
the headgeom.methods protocol: ``method(views)["z"]``, ``method.geometry_problem(z_views) ->
(head, loss)``, ``head_parameters()`` / ``backbone_parameters()``). One call:

1. out = method(views) under no_grad with the backbone in eval mode and everything else in
   ``head_mode`` ("train": the training loss itself, train-mode BatchNorm uses batch statistics;
   "eval": running statistics); z_views = out["z"], the backbone representations of the views;
2. (head, loss) = method.geometry_problem(z_views);
3. per-sample H_eff = G + M blocks of loss ∘ head w.r.t. z_1 from
   :func:`headgeom.geometry.effective_hessian` (exact, ``dtype`` float64 by default) and their
   spectrum with the floor rel_floor · max(max|λ|, S), S the operand scale of G
   (:mod:`headgeom.geometry.engine.operand_scale`, :func:`headgeom.geometry.spectrum`), a
   :class:`~headgeom.tracking.record.HeffReading` (keys ``heff_<reading>_<reduction>_*``, so every
   number says what it is); for a head that couples the samples (train-mode BatchNorm) H_eff is
   not block-diagonal, and by default its whole-operator extremes come from Lanczos instead
   (``source="operator"``, keys ``..._op_*``, see ``coupled``);
4. spread, covariance condition number and RankMe of z_1 and of the head outputs (the
   functions of :mod:`headgeom.eval.rankme`); the view gap, the angle between the projector's
   outputs on the first two views of each probe sample (:mod:`headgeom.theory.view_gap`); the
   head/backbone relative update size since the previous call (:mod:`headgeom.tracking.updates`).

Nothing of the method changes: modes are restored, buffers (BatchNorm running statistics, EMA
and centre buffers) are copied back after the forward passes, the RNG is forked, and the engine
analyses copies of the head. Non-finite values (e.g. a condition number of a fully collapsed
batch, the update ratio of a frozen backbone) are undefined: None in the record, left out of the keys.
"""
from __future__ import annotations

import os
import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from headgeom.eval.rankme import covariance_condition, rankme, spread_l2
from headgeom.geometry import READINGS, effective_hessian, spectrum
from headgeom.geometry.engine.head_cache import HeadCache
from headgeom.geometry.engine.head_function import is_row_wise, prepare_head
from headgeom.geometry.engine.operand_scale import DEFINITION as OPERAND_DEFINITION
from headgeom.geometry.linalg.shifted_power import shifted_power_lambda_min
from headgeom.geometry.linalg.threshold import pullback_and_ratio
from headgeom.io import atomic_write_json
from headgeom.theory.view_gap import view_angles
from headgeom.tracking.record import REDUCTIONS, HeffReading, Statistics, TrackingRecord, Updates, finite_or_none
from headgeom.tracking.updates import UPDATE_DEFINITION, UpdateRatio

HEAD_MODES = ("train", "eval")
COUPLED = {
    "lanczos": "extreme eigenvalues of the whole (N*d, N*d) H_eff (and |M|_2 / |H_eff|_2) by Lanczos at both "
               "ends, float64 matvecs of the whole batch",
    "blocks": "exact diagonal (d, d) blocks of the first block_samples samples from d matvecs each",
}
DEFAULT_COV_REL_TOL = 1e-6  # headgeom.eval.rankme's default
COV_DEFINITION = (
    "sample covariance (ddof=1) of the raw outputs in float64; condition number = "
    "lambda_max / lambda_min over eigenvalues > cov_rel_tol * lambda_max; cov_rank = their count "
    "(headgeom.eval.rankme.covariance_condition; docs/paper.md §4 pitfall 3). It is the representation "
    "covariance's condition number, not H_eff's (pitfall 7)"
)


def _pullback_and_ratio(g: Tensor, m: Tensor, floor: float) -> tuple[float | None, float | None]:
    """(λ_min of the G blocks, the state's threshold ratio max_i λ_max(−G_i^{-1/2} M_i G_i^{-1/2}) when every
    G_i is positive definite beyond ``floor``, else None): r > 1 means the state is past the threshold of its
    own ray G + t·M (docs/paper.md §2 C4, :mod:`headgeom.geometry.linalg.threshold`)."""
    lam, ratio = pullback_and_ratio(g, m)  # one eigendecomposition of G serves both
    lam_g = float(lam.min())
    if not lam_g > floor:
        return finite_or_none(lam_g), None
    return finite_or_none(lam_g), finite_or_none(ratio.max())


def _check_views(views: Any) -> list[Tensor]:
    if isinstance(views, Tensor) or not isinstance(views, (list, tuple)) or not views:
        raise ValueError(
            "probe_views must be a non-empty list of view batches [(N, C, H, W), ...] (one per view, "
            f"as method(views) takes them); got {type(views).__name__}"
        )
    for i, v in enumerate(views):
        if not isinstance(v, Tensor) or v.ndim < 2:
            raise ValueError(f"probe view {i} must be a batch tensor (N, ...); got {getattr(v, 'shape', type(v).__name__)}")
    sizes = {int(v.shape[0]) for v in views}
    if len(sizes) != 1:
        raise ValueError(f"all probe views must hold the same N samples; got batch sizes {sorted(sizes)}")
    if sizes.pop() < 2:
        raise ValueError("the probe batch needs at least 2 samples (spread and covariance use ddof=1)")
    return list(views)


@contextmanager
def _untouched(method: nn.Module, device: torch.device) -> Iterator[None]:
    """Restore every module's mode, every buffer's value and the RNG states (torch CPU, the
    method's CUDA device, numpy, python ``random``) on exit."""
    modes = [(m, m.training) for m in method.modules()]
    buffers = {name: b.detach().clone() for name, b in method.named_buffers()}
    devices = [device] if device.type == "cuda" else []
    py_rng, np_rng = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_rng)
        np.random.set_state(np_rng)
        with torch.no_grad():
            for name, b in method.named_buffers():
                if name in buffers and b.shape == buffers[name].shape:
                    b.copy_(buffers[name])
        for m, mode in modes:
            m.train(mode)


class GeometryTracker:
    """Tracks H_eff spectra and representation statistics every ``every`` steps on a probe batch.

    Args:
        probe_views: the fixed probe batch, a list of view tensors (N, C, H, W) (may instead be
            passed at call time, as the training loop does).
        every: track at steps with ``step % every == 0``; other calls return {} at no cost.
        reading: loss-Hessian reading of G: "ambient" (the exact Hessian of the loss) or
            "tangential" (the Riemannian Hessian on the sphere; scale-invariant, for cosine losses)
            (:mod:`headgeom.geometry.engine.readings`, docs/paper.md §1).
        reduction: "mean" or "sum", see ``REDUCTIONS``.
        rel_floor: an eigenvalue counts as negative below −rel_floor · max(max|λ|, S), S the operand
            scale of G (the engine's ``operand_scale()``, :mod:`headgeom.geometry.engine.operand_scale`):
            the floor is relative to the result or to the operands, whichever is larger (pitfall 2).
        dtype: analysis dtype of the engine (float64 by default).
        block_samples: analyse the blocks of the first ``block_samples`` probe samples only (the
            loss still sees the whole batch, so these blocks are exact); None: all N. It bounds the
            head's part of the work (Jacobians, M) by b; the loss-curvature part of a row-wise head
            still costs d loss HVPs over the whole batch. Required when the head couples samples
            and N·d is large (the coupled path costs one H_eff matvec of the whole batch per row of
            every analysed block).
        head_mode: "train" (the training loss: train-mode BatchNorm, coupled path) or "eval".
        coupled: for a head that couples samples (train-mode BatchNorm) H_eff is not
            block-diagonal. "lanczos" (default): the extreme eigenvalues of the whole (N·d, N·d)
            H_eff and ‖M‖₂/‖H_eff‖₂ by Lanczos at both ends (the paper's "λ_min of the HVP operator
            of the batch loss w.r.t. z1"), keys ``<prefix>op_*``; about 2·lanczos_max_iter matvecs
            of the whole batch. "blocks": the exact diagonal blocks of the first block_samples
            samples, d matvecs per block and part (minutes per block on a CPU at paper widths).
        lanczos_k / lanczos_max_iter / lanczos_tol: Lanczos settings (headgeom.geometry.linalg.lanczos).
        cov_rel_tol: covariance eigenvalues above cov_rel_tol · λ_max enter the condition number.
        chunk_size: samples per chunk in the engine (memory vs speed).
        updates: also report the head/backbone relative update size since the previous call
            (keeps a copy of the method's parameters between calls; False: no update keys).
        power_iterations: also report the paper's λ_min estimate (float32 shifted power iteration
            with this many steps per run, :mod:`headgeom.geometry.linalg.shifted_power`) of the same
            block-diagonal H_eff whose exact λ_min is reported, keys ``<prefix>power_lambda_min``
            and ``<prefix>power_shift``; None (default): not computed. Block path only.
    """

    def __init__(
        self,
        probe_views: Sequence[Tensor] | None = None,
        every: int = 1,
        reading: str = "ambient",
        reduction: str = "mean",
        rel_floor: float = 1e-10,
        dtype: torch.dtype = torch.float64,
        block_samples: int | None = None,
        head_mode: str = "train",
        coupled: str = "lanczos",
        lanczos_k: int = 1,
        lanczos_max_iter: int = 80,
        lanczos_tol: float = 1e-8,
        cov_rel_tol: float = DEFAULT_COV_REL_TOL,
        chunk_size: int = 32,
        updates: bool = True,
        power_iterations: int | None = None,
    ) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1 (track every K steps); got {every!r}")
        if reading not in READINGS:
            raise ValueError(f"unknown reading {reading!r}; choose one of {sorted(READINGS)}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"unknown reduction {reduction!r}; choose one of {sorted(REDUCTIONS)}")
        if not isinstance(rel_floor, (int, float)) or not (0 <= rel_floor < 1):
            raise ValueError(f"rel_floor must be in [0, 1) (default 1e-10); got {rel_floor!r}")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating torch dtype (default torch.float64); got {dtype!r}")
        if block_samples is not None and (isinstance(block_samples, bool) or not isinstance(block_samples, int)
                                          or block_samples < 1):
            raise ValueError(f"block_samples must be None (all samples) or an integer >= 1; got {block_samples!r}")
        if head_mode not in HEAD_MODES:
            raise ValueError(f"head_mode must be one of {HEAD_MODES}; got {head_mode!r}")
        if coupled not in COUPLED:
            raise ValueError(f"coupled must be one of {sorted(COUPLED)}; got {coupled!r}")
        for name, v in (("lanczos_k", lanczos_k), ("lanczos_max_iter", lanczos_max_iter)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
        if not (isinstance(lanczos_tol, (int, float)) and 0 < lanczos_tol < 1):
            raise ValueError(f"lanczos_tol must be in (0, 1); got {lanczos_tol!r}")
        if not (isinstance(cov_rel_tol, (int, float)) and 0 < cov_rel_tol < 1):
            raise ValueError(f"cov_rel_tol must be in (0, 1) (default {DEFAULT_COV_REL_TOL}); got {cov_rel_tol!r}")
        if not isinstance(updates, bool):
            raise ValueError(f"updates must be True or False; got {updates!r}")
        if power_iterations is not None and (isinstance(power_iterations, bool)
                                             or not isinstance(power_iterations, int) or power_iterations < 1):
            raise ValueError(f"power_iterations must be None or an integer >= 1 (the paper's: 20); "
                             f"got {power_iterations!r}")
        self.power_iterations = power_iterations
        self.probe_views = None if probe_views is None else _check_views(probe_views)
        self.every, self.reading, self.reduction = every, reading, reduction
        self.rel_floor, self.dtype, self.block_samples = float(rel_floor), dtype, block_samples
        self.head_mode, self.cov_rel_tol, self.chunk_size = head_mode, float(cov_rel_tol), chunk_size
        self.coupled = coupled
        self.lanczos = {"k": lanczos_k, "max_iter": lanczos_max_iter, "tol": float(lanczos_tol)}
        self.prefix = HeffReading.prefix(reading, reduction)  # of the block path's keys
        self._updates = UpdateRatio() if updates else None
        # the analysis copies of the heads this tracker measures, reused while a head is unchanged
        # (checked at every call: headgeom.geometry.engine.head_cache); owned here, not module state
        self.head_cache = HeadCache()
        self.last_info: dict[str, Any] = {}  # engine info, block path, seconds of the last call

    # ------------------------------------------------------------------ the call
    def due(self, step: int) -> bool:
        return step % self.every == 0

    def __call__(self, step: int, method: nn.Module, probe_views: Sequence[Tensor] | None = None,
                 force: bool = False) -> dict[str, float]:
        """The training loop's tracker protocol: :meth:`measure`'s record as the flat metrics.jsonl
        keys (:meth:`TrackingRecord.metrics`), {} unless ``step % every == 0`` or ``force``."""
        if not force and not self.due(step):
            return {}
        return self.measure(step, method, probe_views).metrics()

    def measure(self, step: int, method: nn.Module, probe_views: Sequence[Tensor] | None = None) -> TrackingRecord:
        """The record of ``method`` at ``step`` (see the module docstring); undefined values are None."""
        if torch.is_inference_mode_enabled():
            raise RuntimeError(
                "GeometryTracker was called under torch.inference_mode(); the H_eff engine differentiates "
                "the head, which inference tensors forbid. Call it outside inference_mode (no_grad is fine)."
            )
        views = _check_views(probe_views) if probe_views is not None else self.probe_views
        if views is None:
            raise ValueError("no probe batch: pass probe_views to GeometryTracker(...) or to the call")
        needed = ("backbone", "projector", "geometry_problem") + (
            ("head_parameters", "backbone_parameters") if self._updates is not None else ())
        for attr in needed:
            if not hasattr(method, attr):
                raise TypeError(f"method {type(method).__name__} lacks {attr!r}; it must follow the SSLMethod protocol")
        t0 = time.perf_counter()
        device = next(method.parameters()).device
        with _untouched(method, device):
            z_views, head, loss, proj = self._forward(method, [v.to(device) for v in views])
            heff = self._geometry(head, loss, z_views[0])
            statistics = self._statistics(z_views[0], proj)
        updates = None
        if self._updates is not None:
            changes = self._updates.update(step, method.head_parameters(), method.backbone_parameters())
            updates = Updates(**{k: finite_or_none(v) for k, v in changes.items()}) if changes else None
        self.last_info["seconds"] = time.perf_counter() - t0
        self.last_info["step"] = step
        return TrackingRecord(step, (heff,), statistics, updates)

    def _forward(self, method: nn.Module, views: list[Tensor]):
        """z_views from ``method(views)`` (backbone in eval mode, the rest in ``head_mode``, no_grad):
        the forward also refreshes what geometry_problem reads from it (BYOL's EMA targets, DINO's
        teacher outputs, cached for exactly these z)."""
        method.train(self.head_mode == "train")
        method.backbone.eval()
        with torch.no_grad():
            out = method(views)
            z_views = out.get("z") if isinstance(out, dict) else None
            if not isinstance(z_views, (list, tuple)) or len(z_views) != len(views):
                raise ValueError(
                    f"method(views) must return a dict whose 'z' lists one backbone representation (N, d) "
                    f"per view ({len(views)}); got {type(out).__name__}"
                    + (f" with keys {sorted(out)}" if isinstance(out, dict) else "")
                )
            z_views = [z.detach() for z in z_views]
            head, loss = method.geometry_problem(z_views)
            proj = [method.projector(z) for z in z_views[:2]]  # the first two views: their gap at the head
        return z_views, head, loss, proj

    # ------------------------------------------------------------------ H_eff
    def _geometry(self, head: Any, loss: Any, z1: Tensor) -> HeffReading:
        t0 = time.perf_counter()
        got = self._blocks(head, loss, z1)
        if got[0] is None:
            return self._operator_spectrum(*got[1:])
        h, m, u, info, operands = got
        t1 = time.perf_counter()
        scale = float(z1.shape[0]) if self.reduction == "sum" else 1.0
        h, m = (scale * 0.5 * (x + x.transpose(1, 2)) for x in (h, m))
        # the floor is relative to G's operands too (headgeom.geometry.engine.operand_scale), in the blocks' reduction
        spec = spectrum(h, self.rel_floor, decomposition={"M": m}, scale=scale * operands.value)
        self.last_info["seconds_blocks"], self.last_info["seconds_spectrum"] = t1 - t0, time.perf_counter() - t1
        info.update(n_blocks=int(h.shape[0]), reduction=self.reduction,
                    reduction_definition=REDUCTIONS[self.reduction], head_mode=self.head_mode)
        self.last_info["engine"] = info
        self._u = u
        ratios = spec.norm_ratios["M"]
        lambda_min_g, ratio = _pullback_and_ratio(h - m, m, spec.floor)
        power: dict[str, float | None] = {}
        if self.power_iterations is not None:  # the same blocks, in float32, as the paper's estimator sees them
            h32 = h.to(torch.float32)
            est = shifted_power_lambda_min(lambda v: torch.bmm(h32, v[..., None])[..., 0], tuple(h.shape[:2]),
                                           iterations=self.power_iterations, device=h.device)
            power = {"power_lambda_min": finite_or_none(est.lambda_min), "power_shift": finite_or_none(est.shift)}
        return HeffReading(
            self.reading, self.reduction, "blocks",
            lambda_min=finite_or_none(spec.lambda_min), lambda_max=finite_or_none(spec.lambda_max),
            n_negative=finite_or_none(spec.n_negative),
            frac_samples_negative=finite_or_none((spec.per_block["n_negative"] > 0).double().mean()),
            floor=finite_or_none(spec.floor), operand_scale=finite_or_none(scale * operands.value),
            M_ratio_fro=finite_or_none(ratios["fro"]),
            M_ratio_spectral=finite_or_none(ratios["spectral"]), lambda_min_G=lambda_min_g, threshold_ratio=ratio,
            **power)

    def _engine(self, head: Any, loss: Any, z: Tensor):
        return effective_hessian(head, loss, z, reading=self.reading, dtype=self.dtype, chunk_size=self.chunk_size,
                                 cache=self.head_cache)

    def _blocks(self, head: Any, loss: Any, z1: Tensor) -> tuple:
        """H and M blocks (b, d, d) of the first b probe samples, the head output u (N, k) in the
        analysis dtype, the engine's record with the path taken ("block_path") and the operand
        scale over all N probe samples (the engine's ``operand_scale()``, at least that of the b
        blocks); or (None, engine, record) for a coupled head under coupled="lanczos"."""
        z = z1.detach().to(self.dtype)
        n = z.shape[0]
        b = n if self.block_samples is None else min(self.block_samples, n)
        prepared = prepare_head(head, self.dtype, z.device, self.head_cache)  # the analysis copy; head untouched
        fn = prepared.fn
        row_wise = not prepared.train_mode_batchnorm and is_row_wise(fn, z)
        eh = self._engine(fn, loss, z)
        info = eh.info()
        info["operand_scale"] = eh.operand_scale().record()
        if not row_wise and self.coupled == "lanczos":
            return None, eh, info
        if row_wise:
            # block i of a row-wise head depends on z_i alone: the engine's rows= query computes the
            # first b samples' blocks only (the loss still sees the whole batch, so they are exact)
            h, _, m = eh.decomposed_blocks(rows=None if b == n else b)
            if b < n:
                info["block_path"] = f"{info['block_path']} (first {b} of {n} samples)"
        elif b == n and eh.dim <= eh.max_dense:
            h, _, m = eh.decomposed_blocks()
            info["block_path"] = "engine coupled path (one matvec per coordinate)"
        elif self.block_samples is None:
            raise ValueError(
                f"the head couples samples (train-mode BatchNorm) and N*d = {n}*{eh.d} = {eh.dim} > "
                f"{eh.max_dense}: its exact blocks need N*d H_eff matvecs of the whole batch; pass "
                "block_samples (e.g. 8) to analyse the first samples' blocks, or head_mode='eval'"
            )
        else:
            h, _, m = eh.decomposed_blocks(rows=b)
            info["block_path"] = f"coupled matvecs (first {b} of {n} samples, {b * eh.d} matvecs per part)"
        return h, m, eh.u, info, eh.operand_scale()

    def _operator_spectrum(self, eh, info: dict[str, Any]) -> HeffReading:
        """λ_min, λ_max of the whole H_eff and ‖M‖₂/‖H_eff‖₂ by Lanczos (coupled heads)."""
        t0 = time.perf_counter()
        kw = dict(k=self.lanczos["k"], tol=self.lanczos["tol"], max_iter=min(self.lanczos["max_iter"], eh.dim))
        spec = spectrum(eh.operator("H"), self.rel_floor, decomposition={"M": eh.operator("M")},
                        scale=eh.operand_scale().value, **kw)
        self.last_info["seconds_blocks"], self.last_info["seconds_spectrum"] = 0.0, time.perf_counter() - t0
        scale = float(eh.n) if self.reduction == "sum" else 1.0
        info.update(block_path="lanczos on the whole coupled H_eff", n_blocks=None, reduction=self.reduction,
                    reduction_definition=REDUCTIONS[self.reduction], head_mode=self.head_mode,
                    lanczos={k: spec.method[k] for k in ("iterations", "converged", "exact", "k", "tol")})
        self.last_info["engine"] = info
        self._u = eh.u
        return HeffReading(
            self.reading, self.reduction, "operator",
            lambda_min=finite_or_none(scale * spec.lambda_min), lambda_max=finite_or_none(scale * spec.lambda_max),
            floor=finite_or_none(scale * spec.floor),
            operand_scale=finite_or_none(scale * eh.operand_scale().value),
            converged=float(spec.method["converged"]), iterations=float(spec.method["iterations"]),
            n_negative=finite_or_none(spec.n_negative),  # only when the Krylov space spanned everything
            M_ratio_spectral=finite_or_none(spec.norm_ratios["M"]["spectral"]))

    # ------------------------------------------------------------------ statistics
    def _statistics(self, z1: Tensor, proj: list[Tensor]) -> Statistics:
        out: dict[str, float | None] = {}
        outputs = {"z": z1, "projector": proj[0], "head": self._u}
        if len(proj) == 2:  # the view gap: ∠(projector(z1_i), projector(z2_i)) over the probe samples, degrees
            angles = torch.rad2deg(view_angles(*proj))
            out["view_gap_deg"] = finite_or_none(angles.mean())
            out["view_gap_deg_std"] = finite_or_none(angles.std()) if angles.numel() > 1 else None
        for name, x in outputs.items():
            out[f"spread_{name}"] = finite_or_none(spread_l2(x))
        for name in ("z", "projector"):
            cc = covariance_condition(outputs[name], self.cov_rel_tol)
            out[f"cov_condition_{name}"] = finite_or_none(cc["cond"])
            out[f"cov_rank_{name}"] = finite_or_none(cc["n_kept"])
            out[f"rankme_{name}"] = finite_or_none(rankme(outputs[name]))
        return Statistics(**out)

    # ------------------------------------------------------------------ what the numbers are
    def metadata(self) -> dict[str, Any]:
        """The definitions behind every key (JSON-serialisable); write it beside metrics.jsonl."""
        p = self.prefix
        return {
            "every": self.every, "reading": self.reading, "reading_definition": READINGS[self.reading],
            "reduction": self.reduction, "reduction_definition": REDUCTIONS[self.reduction],
            "rel_floor": self.rel_floor, "dtype": str(self.dtype).replace("torch.", ""),
            "block_samples": self.block_samples, "head_mode": self.head_mode,
            "coupled": self.coupled, "coupled_definition": COUPLED[self.coupled], "lanczos": self.lanczos,
            "cov_rel_tol": self.cov_rel_tol, "updates": self._updates is not None,
            "power_iterations": self.power_iterations,
            "probe_batch": None if self.probe_views is None else int(self.probe_views[0].shape[0]),
            "keys": {
                p + "lambda_min / lambda_max": "extreme eigenvalues over all analysed per-sample H_eff "
                "blocks of the method's geometry_problem loss w.r.t. backbone view 1 (z_1), exact eigh in float64",
                p + "n_negative": "eigenvalues < -floor summed over the blocks, floor = rel_floor * "
                "max(max|lambda|, operand_scale)",
                p + "frac_samples_negative": "fraction of blocks with at least one eigenvalue < -floor",
                p + "floor": "the floor used, rel_floor * max(max|lambda|, operand_scale): relative to the "
                "result or to the operands of G, whichever is larger (docs/paper.md §4 pitfall 2); 0 means "
                "H_eff vanished on the probe (a dead head, docs/paper.md §4 pitfall 8), which is not the same "
                "as 'no negative curvature'",
                p + "operand_scale": "S over the probe samples (max over i), in the blocks' reduction: " + OPERAND_DEFINITION
                + "; under the tangential reading a head whose Jacobian is almost radial makes G tiny by "
                "cancellation, leaving round-off of order eps * S that a floor relative to the result would "
                "count as curvature",
                p + "M_ratio_fro / M_ratio_spectral": "|M| / |H_eff| of the block-diagonal matrices",
                p + "lambda_min_G": "smallest eigenvalue of the analysed G = H_eff - M blocks (G PSD: any negative "
                "curvature of H_eff is M's doing)",
                p + "threshold_ratio": "max over blocks of lambda_max(-G^-1/2 M G^-1/2) when every G block is positive "
                "definite beyond the floor (else absent): the state sits at that multiple of the threshold of its own "
                "ray G + tM, past it when > 1 (headgeom.geometry.linalg.threshold)",
                p + "power_lambda_min / power_shift": "with power_iterations: the paper's float32 shifted power "
                "iteration on the same block-diagonal H_eff (headgeom.geometry.linalg.shifted_power; seed 0): its "
                "lambda_min estimate and its shift (the dominant eigenvalue's estimate)",
                p + "op_*": "coupled heads (train-mode BatchNorm) with coupled='lanczos': extreme eigenvalues "
                "of the whole H_eff, |M|_2/|H_eff|_2 (the M end converged to lanczos tol), converged (1/0), "
                "iterations; n_negative only when the Krylov space was exact",
                "spread_z / spread_projector / spread_head": "mean per-dimension std (ddof=1) of the "
                "L2-normalised rows of z_1, projector(z_1) and the geometry head's output h(z_1)",
                "view_gap_deg / view_gap_deg_std": "the gap between the first two views at the head: mean and std "
                "(ddof=1) over the probe samples of the angle between projector(z_1) and projector(z_2), degrees "
                "(headgeom.theory.view_gap; docs/paper.md §2 C4); absent with one view",
                "cov_condition_* / cov_rank_*": COV_DEFINITION,
                "rankme_*": "RankMe (Garrido et al. 2023) of z_1 / projector(z_1), eps 1e-7",
                "update_*": UPDATE_DEFINITION,
            },
            "modes": f"backbone in eval mode under no_grad; head and loss in {self.head_mode} mode; "
                     "modes, buffers and RNG restored after each call",
            "omitted": "a key is left out at a step where its value is undefined (NaN or inf)",
            "last_call": self.last_info.get("engine"),
        }

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to continue the update-size series (the parameters at the last
        tracking call); the probe batch and settings come from the run's config."""
        return {"updates": None if self._updates is None else self._updates.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self._updates is not None and state["updates"] is not None:
            self._updates.load_state_dict(state["updates"])

    def write_metadata(self, path: str | os.PathLike) -> Path:
        """Write :meth:`metadata` as JSON atomically (e.g. RUN_DIR/tracking.json beside metrics.jsonl)."""
        return atomic_write_json(path, self.metadata())
