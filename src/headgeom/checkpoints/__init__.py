"""Official SSL checkpoints read without executing pickled code (docs/paper.md §4, pitfall 10).

>>> from headgeom.checkpoints import load_checkpoint          # doctest: +SKIP
>>> m = load_checkpoint("resnet50_fullckpt.pth")             # doctest: +SKIP
>>> m.release, m.head_spec.to_string()                       # doctest: +SKIP
('vicreg', '2048-8192-8192-8192:relu:bn:nolastbias')
"""
from headgeom.checkpoints.detect import RELEASES, HeadPart, Layout, detect
from headgeom.checkpoints.heads_from_state import CheckpointArchitectureError
from headgeom.checkpoints.infer_backbone import infer_backbone
from headgeom.checkpoints.loaders import LoadedModel, build_backbone, load_checkpoint, load_layout
from headgeom.checkpoints.official import OFFICIAL_FILES, OfficialFile, ShaCheck, check_sha256
from headgeom.runs.safe_load import (
    CheckpointFormatError,
    InertFunction,
    InertNamespace,
    LoadedFile,
    UnsafeCheckpointError,
    file_sha256,
    safe_load,
    scan_globals,
)

__all__ = [
    "RELEASES", "HeadPart", "Layout", "detect", "CheckpointArchitectureError", "infer_backbone",
    "LoadedModel", "build_backbone", "load_checkpoint", "load_layout", "OFFICIAL_FILES", "OfficialFile",
    "ShaCheck", "check_sha256", "CheckpointFormatError", "InertFunction", "InertNamespace", "LoadedFile",
    "UnsafeCheckpointError", "file_sha256", "safe_load", "scan_globals",
]
