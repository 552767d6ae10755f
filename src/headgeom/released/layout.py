"""Every pinned released file, its reader, and the check of a whole copy (docs/paper.md §3.8).

:func:`reader_of` maps an upstream path (``results/<dataset>/<backbone>/<file>``) to the reader of
its kind; :func:`read_file` verifies the file against the manifest and reads it;
:func:`check_copy` does that for every pinned file and says, per file, what is there, for
``headgeom released check``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from headgeom.released.collapse import CollapseGrid, parse_collapse
from headgeom.released.depth import DepthAblation, parse_depth
from headgeom.released.hessian import HessianTrack, parse_hessian
from headgeom.released.log import ExperimentLog, parse_log
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.released.orbits import Orbits, parse_orbits
from headgeom.released.probes import Curvature, Guillotine, parse_curvature, parse_guillotine

__all__ = ["FileCheck", "Record", "check_copy", "read_file", "reader_of", "summarise"]

Record = CollapseGrid | HessianTrack | Orbits | DepthAblation | Guillotine | Curvature | ExperimentLog

_RUN = r"results/(?P<dataset>\w+)/(?P<backbone>\w+)/"
_KINDS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], Path], Any]], ...] = (
    (re.compile(_RUN + r"collapse_results\.npy"), lambda m, p: parse_collapse(p, m["dataset"], m["backbone"])),
    (re.compile(_RUN + r"guillotine_results\.npy"), lambda m, p: parse_guillotine(p, m["dataset"], m["backbone"])),
    (re.compile(_RUN + r"curvature_results\.npy"), lambda m, p: parse_curvature(p, m["dataset"], m["backbone"])),
    (re.compile(_RUN + r"experiment_log\.txt"), lambda m, p: parse_log(p, m["dataset"], m["backbone"])),
    (re.compile(_RUN + r"orbit_visualization\.npy"), lambda m, p: parse_orbits(p, m["backbone"])),
    (re.compile(_RUN + r"hessian_tracker/raw_data_(?P<run>\w+)\.npz"), lambda m, p: parse_hessian(p, m["run"])),
    (re.compile(_RUN + r"head_depth_ablations/geometric_ablation_depth_(?P<depth>\d+)\.npz"),
     lambda m, p: parse_depth(p, int(m["depth"]))),
)


def reader_of(path: str) -> Callable[[Path], Record]:
    """The reader of the released file at upstream ``path``: file path -> typed record."""
    for pattern, read in _KINDS:
        m = pattern.fullmatch(path)
        if m is not None:
            return lambda file, m=m, read=read: read(m, Path(file))
    raise ReleasedFileError(f"{path!r} is not a kind of released file headgeom reads")


def read_file(root: str | Path, path: str, manifest: Manifest = MANIFEST) -> Record:
    """The record of the pinned file ``path`` of the copy at ``root``, after its size and sha256 check."""
    reader = reader_of(path)
    return reader(verify_file(root, path, manifest))


def summarise(record: Record) -> str:
    """What a record holds, in a few words (the last column of ``headgeom released check``)."""
    if isinstance(record, CollapseGrid):
        shapes = sorted({(r.seeds, r.epochs) for r in record.runs})
        extra = sorted({name for r in record.runs for name in r.series})
        return (f"{len(record.runs)} runs, " + ", ".join(f"{s} seeds x {e} epochs" for s, e in shapes)
                + (f"; series: spread, {', '.join(extra)}" if extra else "; series: spread"))
    if isinstance(record, HessianTrack):
        return f"{record.run}: {record.epochs.size} epochs of lambda_min (authors' float32 estimate), variance, condition"
    if isinstance(record, Orbits):
        g = record.grid
        return (f"{g.images} orbits x {g.steps} angles, z dim {g.z.shape[2]}, h dim {g.h.shape[2]}, "
                f"classes {', '.join(record.class_names)}")
    if isinstance(record, DepthAblation):
        g = record.grid
        return (f"depth {record.depth}: linear acc z {record.acc_backbone_linear:.4f} h {record.acc_head_linear:.4f}; "
                f"{g.images} orbits x {g.steps} angles; {record.curvatures_z.size} curvatures")
    if isinstance(record, Guillotine):
        return (f"linear z {record.backbone_linear:.4f} h {record.head_linear:.4f}; "
                f"MLP z {record.backbone_mlp:.4f} h {record.head_mlp:.4f}")
    if isinstance(record, Curvature):
        return f"{record.ratio.size} seeds; ratio h/z mean {record.ratio.mean():.3f}"
    if isinstance(record, ExperimentLog):
        def said(name: str) -> str:
            return "/".join(str(v) for v in record.values(name))
        return (f"{len(record.sessions)} session(s) on {said('device')}; batch {said('batch_size')}, "
                f"seeds {said('seeds')}, collapse epochs {said('collapse_epochs')} at lr {said('lr_collapse')}, "
                f"guillotine epochs {said('guillotine_epochs')} at lr {said('lr_guillotine')}")
    return type(record).__name__


@dataclass(frozen=True)
class FileCheck:
    """The check of one pinned file: ``status`` "ok", "missing" or "bad", and what was found."""

    path: str
    status: str
    bytes: int | None
    detail: str


def check_copy(root: str | Path, manifest: Manifest = MANIFEST) -> list[FileCheck]:
    """Verify and read every pinned file of the copy at ``root``; one :class:`FileCheck` each.

    Reads only: a bad file is reported with its one-line error, never changed.
    """
    out = []
    for entry in manifest.files:
        file = Path(root) / entry.path
        if not file.is_file():
            out.append(FileCheck(entry.path, "missing", None, f"fetch it: {manifest.url(entry.path)}"))
            continue
        try:
            out.append(FileCheck(entry.path, "ok", file.stat().st_size, summarise(read_file(root, entry.path, manifest))))
        except ReleasedFileError as err:
            out.append(FileCheck(entry.path, "bad", file.stat().st_size, str(err)))
    return out
