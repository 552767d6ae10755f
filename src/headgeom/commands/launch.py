"""The launcher options of ``headgeom reproduce`` and ``headgeom theory`` (the launcher itself is
built from them by :func:`headgeom.launch.cli.launcher_from_args`)."""
from __future__ import annotations

import argparse

from .options import positive
from .vocabulary import LAUNCHERS

__all__ = ["add_launch_options"]


def add_launch_options(p: argparse.ArgumentParser) -> None:
    """--launcher, --jobs, --wait, --status and the SLURM resource overrides."""
    g = p.add_argument_group("where cells run")
    g.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: this machine, independent cells in parallel processes (default); slurm: one SLURM "
                        "job per cell through submitit (pip install -e \".[cluster]\")")
    g.add_argument("--jobs", type=positive(1), default=None, metavar="N",
                   help="local: cells run side by side in N processes, each with cores/N torch threads "
                        "(default: the usable CPU cores; 1 = one after another in this process)")
    g.add_argument("--status", action="store_true",
                   help="print every cell's state (done, failed with its log and error, pending, running, "
                        "missing) and exit; runs and submits nothing")
    g.add_argument("--dry-run", action="store_true",
                   help="print each experiment's cells, its key settings against the paper's (with why they "
                        "differ), the resources per cell and the GPU-hours they add up to, and exit; runs, "
                        "writes and submits nothing")
    g.add_argument("--wait", action="store_true",
                   help="slurm: wait for the jobs and write the report (default: submit and return; rerun the "
                        "same command later to aggregate finished cells and resubmit failed ones)")
    s = p.add_argument_group("SLURM resources (override the experiments' per-preset values)")
    s.add_argument("--partition", default=None, help="SLURM partition")
    s.add_argument("--account", default=None, help="SLURM account")
    s.add_argument("--gpus-per-cell", type=positive(0), default=None, metavar="N", help="GPUs per cell (job)")
    s.add_argument("--time", default=None, metavar="TIME",
                   help="time limit per cell: minutes, HH:MM:SS or D-HH:MM:SS (a cell that reaches it is "
                        "checkpointed and requeued)")
    s.add_argument("--slurm-option", action="append", default=None, metavar="KEY=VALUE",
                   help="any other sbatch option, repeatable (e.g. --slurm-option constraint=a100 "
                        "--slurm-option qos=high)")
