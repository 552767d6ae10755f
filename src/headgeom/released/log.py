"""The authors' run logs, ``results/<dataset>/<backbone>/experiment_log.txt`` (docs/paper.md §3.8):
how the released results were produced, in the logs' own words.

A log holds one or more sessions, each opened by a ``Logging to logs/<stamp>.log`` line, of lines
``HH:MM:SS - INFO - message``. A session states its device, PyTorch version and configuration
(dataset, batch size, number of seeds, collapse / guillotine / probe epochs, the collapse and
guillotine learning rates), then the experiments it ran, the collapse-grid heads and seeds it
started, the probe accuracies it printed, the files it saved and its total runtime. What a
session does not print stays None or empty.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.released.probes import PROBE_RUNS
from headgeom.runs.safe_load import file_sha256

__all__ = ["ExperimentLog", "LogSession", "log_path", "parse_log", "parse_log_text", "read_log"]

_LINE = re.compile(r"^\d\d:\d\d:\d\d - [A-Z]+ - (?P<msg>.*)$")
_FIELDS = {  # message pattern -> (attribute, type)
    r"Device: (\S+)": ("device", str),
    r"PyTorch version: (\S+)": ("torch_version", str),
    r"Dataset: (\S+)": ("dataset", str),
    r"Batch size: (\d+)": ("batch_size", int),
    r"Num seeds: (\d+)": ("seeds", int),
    r"Collapse epochs: (\d+)": ("collapse_epochs", int),
    r"Guillotine epochs: (\d+)": ("guillotine_epochs", int),
    r"Probe epochs: (\d+)": ("probe_epochs", int),
    r"Results directory: (\S+)": ("results_dir", str),
    r"Total runtime: ([\d.]+) minutes.*": ("runtime_minutes", float),
}
_LRS = re.compile(r"Learning rates: collapse=([\d.eE+-]+), guillotine=([\d.eE+-]+)")
_EXPERIMENT = re.compile(r"EXPERIMENT (\S+): (.+)")
_COLLAPSE_RUN = re.compile(r"\[\w+\] Exp 1: (\w+) head \(Seed (\d+)\)")
_SAVED = re.compile(r"Saved .* to (\S+)")
_PROBE = re.compile(r"(Backbone|Head) - (Linear|MLP) Probe:\s+([\d.]+)")
REQUIRED = ("device", "batch_size", "seeds", "collapse_epochs", "guillotine_epochs", "lr_collapse", "lr_guillotine")


@dataclass(frozen=True)
class LogSession:
    """One session of a log: its configuration as printed, and what it ran and saved."""

    log_name: str
    device: str | None = None
    torch_version: str | None = None
    dataset: str | None = None
    batch_size: int | None = None
    seeds: int | None = None
    collapse_epochs: int | None = None
    guillotine_epochs: int | None = None
    probe_epochs: int | None = None
    lr_collapse: float | None = None
    lr_guillotine: float | None = None
    results_dir: str | None = None
    runtime_minutes: float | None = None
    experiments: tuple[str, ...] = ()
    collapse_runs: tuple[tuple[str, int], ...] = ()  # (head activation, seed) in start order
    saved: tuple[str, ...] = ()
    probe_accuracies: dict[str, float] = field(default_factory=dict)  # e.g. "backbone_linear" -> 0.5227


@dataclass(frozen=True, eq=False)
class ExperimentLog:
    """A parsed log file: its sessions in order."""

    dataset: str
    backbone: str
    path: Path
    sha256: str
    sessions: tuple[LogSession, ...]

    def values(self, name: str) -> tuple:
        """The distinct values of the session attribute ``name`` over the sessions that print it."""
        seen: list = []
        for s in self.sessions:
            v = getattr(s, name)
            if v is not None and v not in seen:
                seen.append(v)
        return tuple(seen)


def parse_log_text(text: str, where: str = "log") -> tuple[LogSession, ...]:
    """The sessions of a log's text; raises :class:`ReleasedFileError` when none states its setup."""
    sessions: list[dict] = []
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if m is None:
            continue
        msg = m["msg"].strip()
        if msg.startswith("Logging to "):
            sessions.append({"log_name": msg[len("Logging to "):], "experiments": [], "collapse_runs": [],
                             "saved": [], "probe_accuracies": {}})
            continue
        if not sessions:
            continue
        s = sessions[-1]
        for pattern, (attr, kind) in _FIELDS.items():
            f = re.fullmatch(pattern, msg)
            if f:
                s[attr] = kind(f[1])
        if (f := _LRS.fullmatch(msg)):
            s["lr_collapse"], s["lr_guillotine"] = float(f[1]), float(f[2])
        elif (f := _EXPERIMENT.fullmatch(msg)):
            s["experiments"].append(f"{f[1]}: {f[2]}")
        elif (f := _COLLAPSE_RUN.fullmatch(msg)):
            s["collapse_runs"].append((f[1], int(f[2])))
        elif (f := _SAVED.fullmatch(msg)):
            s["saved"].append(f[1])
        elif (f := _PROBE.match(msg)):
            s["probe_accuracies"][f"{f[1].lower()}_{f[2].lower()}"] = float(f[3])
    if not sessions:
        raise ReleasedFileError(f"{where} holds no session (no 'Logging to ...' line); not one of the authors' "
                                f"experiment logs")
    out = []
    for s in sessions:
        missing = [k for k in REQUIRED if s.get(k) is None]
        if missing:
            raise ReleasedFileError(f"{where}: session {s['log_name']} does not state {missing[0]!r} "
                                    f"({len(missing)} of {len(REQUIRED)} setup lines missing); the log is "
                                    f"damaged or not the authors' log")
        out.append(LogSession(**{**s, "experiments": tuple(s["experiments"]),
                                 "collapse_runs": tuple(s["collapse_runs"]), "saved": tuple(s["saved"])}))
    return tuple(out)


def log_path(dataset: str, backbone: str) -> str:
    """The upstream path of the log of ``backbone`` on ``dataset``."""
    if (dataset, backbone) not in PROBE_RUNS:
        raise ReleasedFileError(f"no released log for {backbone} on {dataset}")
    return f"results/{dataset}/{backbone}/experiment_log.txt"


def parse_log(path: str | Path, dataset: str, backbone: str) -> ExperimentLog:
    """Read a log file (no sha256 check: :func:`read_log` does that first)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ReleasedFileError(f"{path} cannot be read as text ({err})") from err
    return ExperimentLog(dataset=dataset, backbone=backbone, path=path, sha256=file_sha256(path),
                         sessions=parse_log_text(text, str(path)))


def read_log(root: str | Path, dataset: str, backbone: str, manifest: Manifest = MANIFEST) -> ExperimentLog:
    """The log of ``backbone`` on ``dataset`` from the copy at ``root``, checked against ``manifest`` first."""
    return parse_log(verify_file(root, log_path(dataset, backbone), manifest), dataset, backbone)
