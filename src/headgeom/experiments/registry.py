"""Experiments by id: each claim of docs/paper.md §2 (C1…C12) is checked by a registered experiment.

An experiment is data (big_vision style): presets are functions returning a frozen config
dataclass; the work is split into *cells* (one setting × one seed, JSON-able parameters), each
run independently into its own run directory so that a re-run skips finished cells; a
``summarize`` step turns the cells' metrics into claims, tables and figures. The usual cell list
(every setting × every seed, with the check of the seed count) is
:func:`headgeom.runs.cell.seeded_cells`.

    EXPERIMENT = Experiment(
        id="C4", title="...", statement="...",                     # statement quotes docs/paper.md §2
        presets={"quick": quick, "small": small, "paper": paper},  # () -> frozen dataclass
        cells=lambda config, seeds: seeded_cells("C4", [{"head": "silu"}], seeds, default=config.seeds),
        run_cell=lambda config, cell: {"lambda_min": -1e-3, ...},   # JSON-able metrics
        summarize=lambda config, results: Summary(...),            # results: [(cell, metrics)]
        claims=(Claim("C13", "...", "no number"),),                # a claim the paper's list lacks (optional)
        protocol=PaperProtocol({...}),                             # the paper's settings (docs/paper.md §3)
    )
    register(EXPERIMENT)

A summary's claim rows are :class:`headgeom.claims.row.Row` objects (the one schema, checked when a row is
made: id, statement, setting, measured, verdict, evidence, headline, criterion, and the optional budget,
out-of-distribution flag, ...), each decided by a rule of :mod:`headgeom.claims` that returns a
:class:`headgeom.claims.verdict.Verdict`; its tables are :class:`headgeom.report.table.Table` objects.
The runner adds ``source`` (:mod:`headgeom.claims.sources`: "ours (<preset>)") to every row that does not
name its own (the authors' released runs re-judged name theirs), and ``experiment``.

An experiment lacking the preset asked for is skipped when every experiment runs (``--preset released``
runs only those that have it) and is an error when named with ``--only``.
"""
from __future__ import annotations

import importlib
import pickle
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from headgeom.claims.claim import Claim, declare
from headgeom.claims.estimates import measured  # noqa: F401  (re-exported: the experiments' estimate entries)
from headgeom.claims.row import Row
from headgeom.launch.resources import Resources
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.table import Table
from headgeom.runs.cell import Cell

SHARED_PRESETS = ("quick", "small", "paper")  # every experiment of headgeom's own runs has these
PRESETS = SHARED_PRESETS + ("released",)  # "released": only the re-judged released runs (RELEASED) have it

Metrics = dict[str, Any]


@dataclass
class Summary:
    """What an experiment reports: claim rows, tables (each with its title), notes and figure builders.

    figures: (file name, builder) where the builder takes no argument or the cell results
    [(cell, metrics)] and returns a Figure; plotting stays apart from computing: the builder is a
    closure calling the experiment's drawing function in headgeom.report.plots.<experiment module>
    with the data the summary computed, and the runner saves each figure as PNG beside the report.
    """

    claims: list[Row] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[tuple[str, Callable[..., Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    statement: str
    presets: dict[str, Callable[[], Any]]
    cells: Callable[[Any, int], list[Cell]]
    run_cell: Callable[[Any, Cell], Metrics]
    summarize: Callable[[Any, list[tuple[Cell, Metrics]]], Summary]
    theory: bool = False  # part of `headgeom theory`
    # what one cell needs per preset (GPUs, cores, memory, time limit); a preset not named gets Resources()
    resources: dict[str, Resources] = field(default_factory=dict)
    # a training experiment: the headgeom.train.TrainConfig of a cell, (config, cell) -> TrainConfig;
    # None for an experiment that trains nothing (``headgeom reproduce --dry-run`` reads it)
    train_config: Callable[[Any, Cell], Any] | None = None
    # config keys every cell sets itself (GRID's "train.lr": each run's lr), each with what to set instead:
    # ``headgeom reproduce --set`` refuses them (headgeom.overrides), where the value would be silently ignored
    cell_keys: dict[str, str] = field(default_factory=dict)
    # an experiment whose inputs may be absent (RELEASED: a copy of the authors' results), config -> None when
    # it can run, else why not (one line, e.g. the fetch command); inputs present but bad raise instead.
    # Absent inputs skip it (the reason printed once) unless it was asked for (--only, or a preset only some
    # experiments have), where they are an error
    available: Callable[[Any], str | None] | None = None
    # claims it judges that the paper's list (headgeom.claims.claim.CLAIMS) lacks: registered with it, so that the
    # report's summary says their gist; a row of an undeclared claim is told by its statement
    claims: tuple[Claim, ...] = ()
    # the paper's settings for this experiment (docs/paper.md §2-3) and where the paper preset departs from them;
    # ``headgeom reproduce --dry-run`` prints them side by side, tests/experiments/test_paper_protocol.py checks them
    protocol: PaperProtocol | None = None

    def config(self, preset: str) -> Any:
        if preset not in self.presets:
            raise ValueError(f"experiment {self.id} has no preset {preset!r}; it has {sorted(self.presets)}")
        return self.presets[preset]()

    def cell_resources(self, preset: str) -> Resources:
        return self.resources.get(preset, Resources())

    def address(self) -> str | None:
        """The module whose ``EXPERIMENT`` attribute is this experiment (the convention of every
        module of this package), i.e. what another process (a local worker, a SLURM job) imports to
        find it; None for an experiment registered otherwise (from a script or a test)."""
        name = getattr(self.run_cell, "__module__", None)
        module = sys.modules.get(name) if name else None
        return name if module is not None and getattr(module, "EXPERIMENT", None) is self else None

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # an experiment pickles as its address, so a cell's call can be sent to another process
        address = self.address()
        if address is None:
            raise pickle.PicklingError(f"experiment {self.id} cannot be sent to another process: no importable module "
                                       "has it as its EXPERIMENT attribute")
        return _import_experiment, (address,)


def _import_experiment(module: str) -> Experiment:
    return importlib.import_module(module).EXPERIMENT


EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    if experiment.id in EXPERIMENTS and EXPERIMENTS[experiment.id] is not experiment:
        raise ValueError(f"experiment id {experiment.id!r} is registered twice")
    for claim in experiment.claims:
        declare(claim)
    EXPERIMENTS[experiment.id] = experiment
    return experiment


def protocols() -> dict[str, PaperProtocol]:
    """The paper protocol of every registered experiment that declares one, by id (import them first:
    :func:`load_all`)."""
    return {k: e.protocol for k, e in EXPERIMENTS.items() if e.protocol is not None}


# machinery and the helper modules of experiments (they register nothing)
NOT_EXPERIMENTS = frozenset({"cli", "registry", "runner"})


def experiment_modules() -> list[str]:
    """Names of the modules of headgeom.experiments that register experiments (all but the
    machinery: registry, runner, shared helpers, and private modules)."""
    import pkgutil

    import headgeom.experiments as pkg

    return [info.name for info in pkgutil.iter_modules(pkg.__path__)
            if not info.name.startswith("_") and info.name not in NOT_EXPERIMENTS]


def load_all() -> dict[str, Experiment]:
    """Import every experiment module so that it registers itself."""
    for name in experiment_modules():
        importlib.import_module(f"headgeom.experiments.{name}")
    return EXPERIMENTS
