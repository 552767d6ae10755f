"""headgeom's own training runs as checkpoints: ``headgeom train`` output -> backbone + head.

A run directory holds ``checkpoints/last.pt`` written by ``headgeom.train.save_checkpoint``:
``{"format": "headgeom.train.checkpoint", "version": 1, "method": method.state_dict(),
"config": TrainConfig.to_dict(), ...}``. The method is rebuilt from its own config and filled by
:func:`headgeom.runs.trained.build_trained` (the one loader of trained runs); its ``backbone`` and
``projector`` (and ``predictor``) are the loaded models. For DINO ``which="teacher"`` (the
default, as for the official files) takes the EMA teacher's copies.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from headgeom.checkpoints.heads_from_state import CheckpointArchitectureError
from headgeom.runs.checkpoint_format import CHECKPOINT_FORMAT
from headgeom.runs.safe_load import missing_checkpoint
from headgeom.runs.trained import TrainedRunError, build_trained

__all__ = ["HEADGEOM_FORMAT", "is_headgeom_run", "resolve_checkpoint_path", "load_headgeom_run"]

HEADGEOM_FORMAT = CHECKPOINT_FORMAT


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


def load_headgeom_run(obj: Mapping[str, Any], which: str | None, path: Path | None = None) -> dict[str, Any]:
    """Rebuild the run's method from its config and fill it (headgeom.runs.trained.build_trained, not
    strict: the key reports say what did not fit); returns the LoadedModel fields.

    Keys: backbone, head, predictor, head_spec, backbone_name, backbone_kwargs, missing,
    unexpected, notes, release ("headgeom_<method>"), trained (the TrainedRun).
    """
    if which not in (None, "teacher", "student"):
        raise ValueError(f"which must be None, 'teacher' or 'student', got {which!r}.")
    try:
        run = build_trained(obj, path or Path("checkpoint"), strict=False)
    except TrainedRunError as err:
        raise CheckpointArchitectureError(str(err)) from err
    s, method = run.settings, run.method
    notes = [f"headgeom run: method {s.method!r}, backbone {s.backbone!r} {s.backbone_options}, "
             f"step {obj.get('step')}, epoch {obj.get('epoch')}."]
    teacher = getattr(method, "teacher", None)
    if which == "teacher" and teacher is None:
        raise ValueError(f"which='teacher' applies to DINO runs; this run's method is {s.method!r}.")
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
        "head_spec": getattr(head, "spec", None), "backbone_name": s.backbone,
        "backbone_kwargs": dict(s.backbone_options), "missing": run.missing, "unexpected": run.unexpected,
        "notes": notes, "release": f"headgeom_{s.method}", "trained": run,
    }
