"""``load_checkpoint``: an official SSL checkpoint file -> headgeom backbone + head (docs/paper.md §4.10).

The file is read by :func:`~headgeom.runs.safe_load.safe_load` (no pickled code runs),
its release told by :func:`~headgeom.checkpoints.detect.detect`, and the weights copied into
``headgeom.backbones`` / ``headgeom.heads`` modules. Shape disagreements raise; keys the
models expect but the file lacks (``missing``) and file tensors no model takes
(``unexpected``) are reported, and raise only with ``strict=True``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from headgeom.backbones import VisionTransformer, get_backbone
from headgeom.checkpoints.detect import HeadPart, Layout, detect
from headgeom.checkpoints.heads_from_state import CheckpointArchitectureError, head_state
from headgeom.checkpoints.official import ShaCheck, check_sha256
from headgeom.checkpoints.own_runs import is_headgeom_run, load_headgeom_run, resolve_checkpoint_path
from headgeom.heads import HeadSpec, ProjectionHead
from headgeom.runs.safe_load import safe_load
from headgeom.runs.trained import TrainedRun

__all__ = ["LoadedModel", "build_backbone", "load_checkpoint", "load_layout"]


@dataclass
class LoadedModel:
    """Models built from a checkpoint, in eval mode, with what was and was not loaded."""

    backbone: nn.Module
    head: nn.Module | None
    release: str
    sha256: str
    missing: list[str]
    unexpected: list[str]
    notes: list[str]
    predictor: nn.Module | None = None
    head_spec: HeadSpec | None = None
    backbone_name: str = ""
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    sha256_check: ShaCheck | None = None
    trained: TrainedRun | None = None  # a headgeom run's settings, method and normalisation

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (no tensors): release, sha256 and its check, models, key reports, notes."""
        check = self.sha256_check
        return {
            "release": self.release, "sha256": self.sha256,
            "sha256_check": None if check is None else {"status": check.status, "expected": check.expected,
                                                        "message": check.message},
            "backbone": {"name": self.backbone_name, "options": dict(self.backbone_kwargs),
                         "feature_dim": getattr(self.backbone, "feature_dim", None)},
            "head": None if self.head_spec is None else self.head_spec.to_string(),
            "predictor": None if self.predictor is None else self.predictor.spec.to_string(),
            "missing": list(self.missing), "unexpected": list(self.unexpected),
            "ignored": dict(self.ignored), "notes": list(self.notes),
        }

    def report(self) -> str:
        """A few lines for a terminal or a report: release, models, key problems, notes."""
        lines = [f"release: {self.release}", f"sha256: {self.sha256}"]
        if self.sha256_check is not None:
            lines.append(f"sha256 check: {self.sha256_check.status} ({self.sha256_check.message})")
        lines.append(f"backbone: {self.backbone_name} {self.backbone_kwargs}")
        lines.append(f"head: {self.head_spec.to_string() if self.head_spec is not None else 'none'}")
        if self.predictor is not None:
            lines.append(f"predictor: {self.predictor.spec.to_string()}")
        lines.append(f"missing keys ({len(self.missing)}): {self.missing or 'none'}")
        lines.append(f"unexpected keys ({len(self.unexpected)}): {self.unexpected or 'none'}")
        lines += [f"not loaded: {k}: {why}" for k, why in self.ignored.items()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def build_backbone(name: str, kwargs: dict[str, Any]) -> nn.Module:
    """The backbone ``detect`` named: ``get_backbone(name, **kwargs)`` or a ``VisionTransformer``."""
    if name == "vit":
        return VisionTransformer(**kwargs)
    return get_backbone(name, **kwargs)


def _fill(module: nn.Module, state: dict[str, Tensor], prefix: str) -> tuple[list[str], list[str]]:
    """Copy ``state`` into ``module``; returns (missing, unexpected) keys prefixed by ``prefix``."""
    own = module.state_dict()
    wrong = [f"{prefix}{k}: file {tuple(v.shape)}, model {tuple(own[k].shape)}"
             for k, v in state.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if wrong:
        shown = "; ".join(wrong[:5]) + (f"; ... ({len(wrong)} in all)" if len(wrong) > 5 else "")
        raise CheckpointArchitectureError(
            f"tensor shapes in the file do not fit the {prefix.rstrip('.')} headgeom built from it: {shown}. "
            f"The file is damaged or of an architecture headgeom does not read."
        )
    result = module.load_state_dict(state, strict=False)
    return [prefix + k for k in result.missing_keys], [prefix + k for k in result.unexpected_keys]


def _build_head(part: HeadPart | None, prefix: str) -> tuple[ProjectionHead | None, list[str], list[str]]:
    if part is None:
        return None, [], []
    head = ProjectionHead(part.spec)
    missing, unexpected = _fill(head, head_state(head, part.modules, part.last), prefix)
    return head.eval(), missing, unexpected


def load_layout(layout: Layout, sha256: str = "", sha_check: ShaCheck | None = None,
                strict: bool = False) -> LoadedModel:
    """Build and fill the models a :class:`Layout` describes (see :func:`load_checkpoint`)."""
    backbone = build_backbone(layout.backbone_name, layout.backbone_kwargs)
    missing, unexpected = _fill(backbone, layout.backbone_state, "backbone.")
    head, m2, u2 = _build_head(layout.head, "head.")
    pred, m3, u3 = _build_head(layout.predictor, "predictor.")
    missing += m2 + m3
    unexpected += u2 + u3 + list(layout.unused)
    if strict and (missing or unexpected):
        raise CheckpointArchitectureError(
            f"{layout.release} checkpoint does not fill the models exactly: missing {missing}, unexpected "
            f"{unexpected}. Pass strict=False to load anyway and read LoadedModel.missing/unexpected."
        )
    return LoadedModel(
        backbone=backbone.eval(), head=head, release=layout.release, sha256=sha256, missing=missing,
        unexpected=unexpected, notes=list(layout.notes), predictor=pred,
        head_spec=layout.head.spec if layout.head is not None else None,
        backbone_name=layout.backbone_name, backbone_kwargs=dict(layout.backbone_kwargs),
        ignored=dict(layout.ignored), sha256_check=sha_check,
    )


def load_checkpoint(path: str | os.PathLike[str], which: str | None = None, num_heads: int | None = None,
                    strict: bool = False) -> LoadedModel:
    """Load an official SSL checkpoint (or a plain backbone state dict) into headgeom models.

    Args:
        path: a ``.pth`` / ``.pth.tar`` file written by ``torch.save`` (zip or legacy format), or a
            ``headgeom train`` run directory (its ``checkpoints/last.pt``).
        which: DINO full checkpoints and DINO runs only: "teacher" (default) or "student".
        num_heads: ViT attention heads, if not embed_dim // 64.
        strict: raise if any model key is missing or any model tensor of the file goes unused.

    Returns:
        LoadedModel with ``backbone`` (N, C, H, W) -> (N, d), ``head`` (N, d) -> (N, k) or None,
        both in eval mode, the release id, the file's sha256 and its check, key reports and notes.

    Raises:
        UnsafeCheckpointError: the file's pickle would run code (from safe_load).
        CheckpointFormatError: the file is not a readable torch checkpoint (from safe_load).
        CheckpointArchitectureError: its keys or shapes fit no architecture headgeom can build.
    """
    path = resolve_checkpoint_path(path)
    loaded = safe_load(path)
    if is_headgeom_run(loaded.obj):
        fields = load_headgeom_run(loaded.obj, which, path)
        check = check_sha256(path.name, loaded.sha256, fields["release"])
        model = LoadedModel(sha256=loaded.sha256, sha256_check=check, **fields)
        if strict and (model.missing or model.unexpected):
            raise CheckpointArchitectureError(
                f"headgeom run {path} does not fill its method exactly: missing {model.missing}, "
                f"unexpected {model.unexpected}."
            )
        return model
    layout = detect(loaded.obj, which=which, num_heads=num_heads)
    if loaded.stand_ins:
        layout.notes.append(f"pickled references replaced by inert stand-ins: {list(loaded.stand_ins)}.")
    check = check_sha256(path.name, loaded.sha256, layout.release)
    return load_layout(layout, loaded.sha256, check, strict=strict)
