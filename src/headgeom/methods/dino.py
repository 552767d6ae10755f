"""DINO (Caron et al. 2021): self-distillation with an EMA teacher, centring and sharpening.

The student (backbone + DINO head) sees every view; the teacher (EMA of the student) only
the first ``n_global_views`` (the global crops, in the order of
:class:`headgeom.augment.recipes.MultiCrop`). Loss: :func:`headgeom.objectives.dino` with
the running centre and the current teacher temperature. After each optimiser step
(``on_step_end``): EMA update of the teacher (cosine 0.996 → 1), centre update from the
step's teacher outputs (momentum 0.9), and the teacher temperature of the next step
(DINO's linspace warm-up 0.04 → 0.07 over ``teacher_temp_warmup`` × total steps, then constant).
During the first ``freeze_last_layer`` epochs (official default 1, main_dino.py
``--freeze_last_layer``) the projector's output layer gets no update: its gradients are dropped
after backward (``before_optimizer_step``, DINO's ``cancel_gradients_last_layer``), so the
optimiser skips it (no momentum, no weight decay) until then.

Every step logs the teacher's mean per-sample entropy and the entropy of its batch-mean
distribution (:func:`headgeom.objectives.teacher_entropies`): both at log K is the uniform
collapse, both near 0 the one-dimension collapse.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from headgeom.augment.recipes import Recipe
from headgeom.heads import HeadSpec, get_head_spec
from headgeom.methods.base import SSLMethod, cached_targets, full_precision
from headgeom.methods.dino_center import DINOCenter, teacher_temperature
from headgeom.methods.ema import EMATarget, cosine_momentum
from headgeom.objectives import dino, sum_losses, teacher_entropies


class DINO(SSLMethod):
    """DINO with any head (default: DINOHead d → 2048 → 2048 → 256 → L2 → 65536)."""

    name = "dino"
    DEFAULTS = {
        "student_temp": 0.1,
        "teacher_temp_start": 0.04,
        "teacher_temp": 0.07,
        "teacher_temp_warmup": 0.3,  # fraction of the run's steps (DINO README: 30 epochs)
        "center_momentum": 0.9,
        "momentum_base": 0.996,
        "momentum_final": 1.0,
        "n_global_views": 2,
        "n_local_crops": 8,  # main_dino.py --local_crops_number
        "freeze_last_layer": 1,  # epochs with the output layer fixed (main_dino.py default 1)
    }
    RECIPE = "dino"
    N_VIEWS = None
    DESCRIPTION = "DINO, EMA teacher with centring and sharpening (Caron et al. 2021)"
    OBJECTIVE = "dino"  # one (student, teacher) pair: dino_pair, with its diagonal + rank-1 Hessian

    def __init__(self, backbone, projector, predictor, spec) -> None:
        super().__init__(backbone, projector, predictor, spec)
        o = self.options
        if not (isinstance(o["n_global_views"], int) and o["n_global_views"] >= 2):
            raise ValueError(f"dino n_global_views must be an int >= 2; got {o['n_global_views']!r}")
        if not (0.0 <= o["teacher_temp_warmup"] <= 1.0):
            raise ValueError(
                f"dino teacher_temp_warmup is a fraction of the run's steps in [0, 1]; got {o['teacher_temp_warmup']!r}"
            )
        if o["freeze_last_layer"] < 0:
            raise ValueError(f"dino freeze_last_layer is a number of epochs >= 0; got {o['freeze_last_layer']!r}")
        self.teacher = EMATarget(nn.Sequential(self.backbone, self.projector))
        self.centering = DINOCenter(projector.out_dim, o["center_momentum"])
        # the temperature of the next forward, in state_dict (extra state): schedule step 0
        self.current_teacher_temp = self.teacher_temp_at(0, 1)
        self._pending_center: Tensor | None = None
        # (z1, teacher outputs, centre, temperature) of the last forward, for geometry_problem
        self._teacher_cache: tuple[Tensor, list[Tensor], Tensor, float] | None = None

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("dino", in_dim=in_dim)

    def check_views(self, views: Sequence[Tensor]) -> list[Tensor]:
        views = super().check_views(views)
        n_global = self.options["n_global_views"]
        if len(views) < n_global:
            raise ValueError(
                f"dino needs the {n_global} global views first (n_global_views); got {len(views)} views"
            )
        return views

    def recipe(self, size: int, **kwargs: Any) -> Recipe:
        """DINO multi-crop: 2 globals at ``size`` and ``n_local_crops`` locals at DINO's 96/224 of
        it, rounded to a multiple of a ViT backbone's patch size (so 32-px globals on the
        paper's patch-4 ViT-Tiny get 12-px locals; 224 on ViT-S/16 gives DINO's 96)."""
        if (self.options.get("recipe") or self.RECIPE) == "dino":
            kwargs.setdefault("n_local", self.options["n_local_crops"])
            if "local_size" not in kwargs:
                p = getattr(self.backbone, "patch_size", 1)
                p = p if isinstance(p, int) and p >= 1 else 1
                kwargs["local_size"] = max(p, int(round(size * 96 / 224 / p)) * p)
        return super().recipe(size, **kwargs)

    def teacher_outputs(self, views: Sequence[Tensor]) -> list[Tensor]:
        """Teacher head outputs of the global views, detached, one (N, K) each."""
        return [self.teacher(v) for v in views[: self.options["n_global_views"]]]

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        student = [self.projector(zv) for zv in z]
        teacher = self.teacher_outputs(views)
        o = self.options
        loss = full_precision(lambda s, t, c: dino(s, t, c, o["student_temp"], self.current_teacher_temp),
                              student, teacher, self.centering.center)
        self._teacher_cache = (z[0].detach(), teacher, self.centering.center.detach().clone(),
                               self.current_teacher_temp)
        if self.training:
            self._pending_center = DINOCenter.batch_sum(teacher)
        entropy, marginal = teacher_entropies(teacher, self.centering.center, self.current_teacher_temp)
        logs = {"teacher_temp": self.current_teacher_temp, "teacher_entropy": entropy,
                "teacher_marginal_entropy": marginal}  # collapse monitors, read at log time only
        return {"loss": loss, "z": z, "logs": logs}

    def last_layer(self) -> nn.Module:
        """The projector's output Linear (the weight-normed prototype layer of DINO's head)."""
        linears = [m for m in self.projector.modules() if isinstance(m, nn.Linear)]
        if not linears:
            raise ValueError(f"dino freeze_last_layer needs a projector with a Linear layer; "
                             f"{self.spec.head!r} has none (set freeze_last_layer=0)")
        return linears[-1]

    def before_optimizer_step(self, step: int, epoch: int) -> None:
        """Drop the output layer's gradients while ``epoch < freeze_last_layer`` (official
        ``cancel_gradients_last_layer``: ``p.grad = None``, so the optimiser skips it)."""
        if epoch < self.options["freeze_last_layer"]:
            for p in self.last_layer().parameters():
                p.grad = None

    @torch.no_grad()
    def on_step_end(self, step: int, total_steps: int) -> None:
        o = self.options
        m = cosine_momentum(step, total_steps, o["momentum_base"], o["momentum_final"])
        self.teacher.update_(nn.Sequential(self.backbone, self.projector), m)
        if self._pending_center is not None:
            self.centering.update_(DINOCenter.reduce_mean(*self._pending_center))
            self._pending_center = None
        self.current_teacher_temp = self.teacher_temp_at(step + 1, total_steps)

    def teacher_temp_at(self, step: int, total_steps: int) -> float:
        """The teacher temperature of 0-based ``step``: warm-up over max(1, round(frac · total))
        steps when ``teacher_temp_warmup`` = frac > 0, else ``teacher_temp`` throughout."""
        o = self.options
        frac = o["teacher_temp_warmup"]
        warmup = max(1, int(round(frac * total_steps))) if frac > 0 else 0
        return teacher_temperature(step, warmup, o["teacher_temp_start"], o["teacher_temp"])

    def get_extra_state(self) -> dict[str, float]:
        return {"current_teacher_temp": self.current_teacher_temp}

    def set_extra_state(self, state: dict[str, float]) -> None:
        temp = float(state["current_teacher_temp"])
        if not (temp > 0 and math.isfinite(temp)):
            raise ValueError(f"checkpoint holds an invalid DINO teacher temperature {temp!r}")
        self.current_teacher_temp = temp

    def geometry_problem(self, z_views: Sequence[Tensor]):
        """Student view 1 against every other global view's teacher output, with the training
        loss's averaging over all (teacher, student) pairs; uses the teacher outputs of the
        last ``forward`` on the same batch with its centre and temperature (call
        ``method(views)`` first).

        ``z_views`` must hold every student view (out["z"]): the number of views sets the
        loss's averaging over (teacher, student) pairs."""
        self._check_z(z_views)
        teacher, center, tt = cached_targets(self, self._teacher_cache, z_views[0])
        n_terms = len(teacher) * len(z_views) - len(teacher)  # pairs (i, v), v != i, as objectives.dino
        terms = [self.analysis_loss(t, center=center, teacher_temp=tt) for t in teacher[1:]]
        return self.projector, sum_losses(terms).scaled(1.0 / n_terms)
