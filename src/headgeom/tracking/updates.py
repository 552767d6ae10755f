"""Head-versus-backbone relative update size between consecutive tracking calls (docs/paper.md §3, pitfall 7).

    r_head     = ‖θ_head(t) − θ_head(s)‖ / ‖θ_head(s)‖
    r_backbone = ‖θ_backbone(t) − θ_backbone(s)‖ / ‖θ_backbone(s)‖
    ratio      = r_head / r_backbone

with s the previous tracking call and t this one, ‖·‖ the Euclidean norm of all parameters of
the group concatenated (float64). This is a ratio of relative parameter changes over the steps
between two calls (all optimizer steps in between, momentum and weight decay included), not a
gradient norm nor a ratio of learning rates; the paper's "update ratio" is read this way here.
"""
from __future__ import annotations

import math
from typing import Iterable

from torch import Tensor

UPDATE_DEFINITION = (
    "update_head_rel = |theta_head(t) - theta_head(s)| / |theta_head(s)|, same for the backbone, "
    "s = previous tracking call, t = this one, Euclidean norm over all parameters of the group "
    "(float64); update_ratio = update_head_rel / update_backbone_rel; update_steps = t - s"
)


def snapshot(params: Iterable[Tensor]) -> list[Tensor]:
    """Detached copies of the parameters (same device and dtype)."""
    out = [p.detach().clone() for p in params]
    if not out:
        raise ValueError("the parameter group is empty; head_parameters()/backbone_parameters() yielded nothing")
    return out


def relative_change(before: list[Tensor], after: list[Tensor]) -> float:
    """‖after − before‖ / ‖before‖ over the concatenated group; NaN when ‖before‖ = 0."""
    if len(before) != len(after) or any(a.shape != b.shape for a, b in zip(before, after)):
        raise ValueError(
            f"the parameter group changed between tracking calls ({len(before)} tensors before, "
            f"{len(after)} after, or different shapes); track one method per GeometryTracker"
        )
    diff = sum(float((a.double() - b.double()).square().sum()) for a, b in zip(after, before))
    base = sum(float(b.double().square().sum()) for b in before)
    return math.sqrt(diff) / math.sqrt(base) if base > 0 else math.nan


class UpdateRatio:
    """Remembers the last parameters of head and backbone; ``update`` returns the relative sizes."""

    def __init__(self) -> None:
        self._head: list[Tensor] | None = None
        self._backbone: list[Tensor] | None = None
        self._step: int | None = None

    def reset(self) -> None:
        self._head = self._backbone = self._step = None

    def update(self, step: int, head: Iterable[Tensor], backbone: Iterable[Tensor]) -> dict[str, float]:
        """Metrics since the previous call (empty on the first call), then remember this state."""
        head_now, backbone_now = snapshot(head), snapshot(backbone)
        out: dict[str, float] = {}
        if self._head is not None:
            r_h = relative_change(self._head, head_now)
            r_b = relative_change(self._backbone, backbone_now)
            out = {"update_head_rel": r_h, "update_backbone_rel": r_b, "update_steps": float(step - self._step)}
            out["update_ratio"] = r_h / r_b if r_b > 0 else math.nan
        self._head, self._backbone, self._step = head_now, backbone_now, step
        return out

    def state_dict(self) -> dict:
        """The remembered parameters and step (tensors, lists and ints: torch.save / weights_only safe)."""
        return {"step": self._step, "head": self._head, "backbone": self._backbone}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (e.g. from a checkpoint), so a resumed run reports the update
        since the last tracking call before the interruption instead of a gap."""
        if not isinstance(state, dict) or set(state) != {"step", "head", "backbone"}:
            raise ValueError(f"expected an UpdateRatio.state_dict() with keys step, head, backbone; got {state!r:.200}")
        if (state["head"] is None) != (state["backbone"] is None) or (state["head"] is None) != (state["step"] is None):
            raise ValueError("UpdateRatio state must hold step, head and backbone together, or none of them")
        self._step, self._head, self._backbone = state["step"], state["head"], state["backbone"]
