"""The authors' released results, read as typed records (docs/paper.md §3.8).

The paper's authors published the numeric results of their paper-scale runs with their code (MIT):
collapse grids, Hessian tracks, rotation orbits, head-depth ablations, guillotine probes,
curvatures and run logs. This package reads a copy of them (``--released DIR`` or
``$HEADGEOM_RELEASED``; ``headgeom released fetch DIR`` downloads one), checks every file's size
and sha256 against the manifest it carries (pinned upstream commit), never executes pickled code
(headgeom.released.files), and returns frozen dataclasses. headgeom.released.measures computes from
them, with headgeom's own orbit metrics, what the claims need.
"""
from headgeom.released.collapse import CollapseGrid, CollapseRun, read_collapse
from headgeom.released.depth import DEPTHS, DepthAblation, read_depth
from headgeom.released.fetch import FetchResult, fetch_released
from headgeom.released.hessian import HESSIAN_RUNS, HessianTrack, read_hessian
from headgeom.released.layout import FileCheck, check_copy, read_file
from headgeom.released.log import ExperimentLog, LogSession, read_log
from headgeom.released.measures import DepthRow, ProbeGap, depth_trend, guillotine_gaps, orbit_measures
from headgeom.released.manifest import (MANIFEST, RELEASED_ENV, Manifest, ManifestEntry, ReleasedFileError,
                                        load_manifest, resolve_released_dir, verify_file)
from headgeom.released.orbits import ORBIT_BACKBONES, OrbitGrid, Orbits, read_orbits
from headgeom.released.probes import PROBE_RUNS, Curvature, Guillotine, read_curvature, read_guillotine

__all__ = [
    "DEPTHS", "HESSIAN_RUNS", "MANIFEST", "ORBIT_BACKBONES", "PROBE_RUNS", "RELEASED_ENV", "CollapseGrid",
    "CollapseRun", "Curvature", "DepthAblation", "DepthRow", "ExperimentLog", "FetchResult", "FileCheck",
    "Guillotine", "HessianTrack", "LogSession", "Manifest", "ManifestEntry", "OrbitGrid", "Orbits",
    "ProbeGap", "ReleasedFileError", "check_copy", "depth_trend", "fetch_released", "guillotine_gaps",
    "load_manifest", "orbit_measures", "read_collapse", "read_curvature", "read_depth", "read_file",
    "read_guillotine", "read_hessian", "read_log", "read_orbits", "resolve_released_dir", "verify_file",
]
