"""headgeom's own training runs as checkpoints: ``headgeom train`` output -> backbone + head.

A run directory holds ``checkpoints/last.pt`` written by ``headgeom.train.save_checkpoint``:
``{"format": "headgeom.train.checkpoint", "version": 1, "method": method.state_dict(),
"config": TrainConfig.to_dict(), ...}``. The method is rebuilt from its own config with
``headgeom.train.build_method_from_config`` and filled with ``method``; its ``backbone`` and
``projector`` (and ``predictor``) are the loaded models. For DINO ``which="teacher"`` (the
default, as for the official files) takes the EMA teacher's copies.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from headgeom.checkpoints.heads_from_state import CheckpointArchitectureError
from headgeom.checkpoints.safe_load import missing_checkpoint

__all__ = ["HEADGEOM_FORMAT", "is_headgeom_run", "resolve_checkpoint_path", "load_headgeom_run"]

HEADGEOM_FORMAT = "headgeom.train.checkpoint"
_VERSIONS = (1,)


def is_headgeom_run(obj: Any) -> bool:
    """Whether an unpickled checkpoint was written by ``headgeom train``."""
    return isinstance(obj, Mapping) and obj.get("format") == HEADGEOM_FORMAT


def resolve_checkpoint_path(path: str | os.PathLike[str]) -> Path:
    """``path`` itself for a file; ``path/checkpoints/last.pt`` for a headgeom run directory."""
    path = Path(path)
    if path.is_dir():
        last = path / "checkpoints" / "last.pt"
        if not last.is_file():
            raise missing_checkpoint(last)
        return last
    return path


def load_headgeom_run(obj: Mapping[str, Any], which: str | None) -> dict[str, Any]:
    """Rebuild the run's method from its config and fill it; returns the LoadedModel fields.

    Keys: backbone, head, predictor, head_spec, backbone_name, backbone_kwargs, missing,
    unexpected, notes, release ("headgeom_<method>").
    """
    from headgeom.train import TrainConfig, build_method_from_config  # heavy: only for own runs

    if obj.get("version") not in _VERSIONS:
        raise CheckpointArchitectureError(
            f"headgeom training checkpoint version {obj.get('version')!r}; this headgeom reads {list(_VERSIONS)}."
        )
    if not isinstance(obj.get("config"), Mapping) or not isinstance(obj.get("method"), Mapping):
        raise CheckpointArchitectureError(
            "headgeom training checkpoint without 'config' or 'method'; it is incomplete.")
    config = TrainConfig.from_dict(dict(obj["config"]))
    method = build_method_from_config(config)
    try:
        result = method.load_state_dict(obj["method"], strict=False)
    except RuntimeError as err:
        raise CheckpointArchitectureError(
            f"the checkpoint's tensors do not fit the {config.method!r} model its own config builds: {err}"
        ) from err
    notes = [f"headgeom run: method {config.method!r}, backbone {config.backbone!r} {config.backbone_options}, "
             f"step {obj.get('step')}, epoch {obj.get('epoch')}."]
    teacher = getattr(method, "teacher", None)
    if which not in (None, "teacher", "student"):
        raise ValueError(f"which must be None, 'teacher' or 'student', got {which!r}.")
    if which == "teacher" and teacher is None:
        raise ValueError(f"which='teacher' applies to DINO runs; this run's method is {config.method!r}.")
    if teacher is not None and which != "student":
        backbone, head = teacher.module[0], teacher.module[1]
        notes.append("loaded the EMA teacher (pass which='student' for the online network).")
    else:
        backbone, head = method.backbone, method.projector
    predictor = method.predictor
    for m in (backbone, head, predictor):
        if m is not None:
            m.eval()
    return {
        "backbone": backbone, "head": head, "predictor": predictor,
        "head_spec": getattr(head, "spec", None), "backbone_name": config.backbone,
        "backbone_kwargs": dict(config.backbone_options),
        "missing": [f"method.{k}" for k in result.missing_keys],
        "unexpected": [f"method.{k}" for k in result.unexpected_keys],
        "notes": notes, "release": f"headgeom_{config.method}",
    }
