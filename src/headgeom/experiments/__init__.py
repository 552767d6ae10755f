"""Registered experiments (one module per claim or experiment: ``cN_name.py``, ``collapse_grid.py``,
...; every module here but the machinery registers itself) and the runner. Their claim rows, rules and
verdict words are :mod:`headgeom.claims`'."""
from .registry import EXPERIMENTS, Experiment, Summary, load_all, measured, register

__all__ = ["EXPERIMENTS", "Experiment", "Summary", "load_all", "measured", "register"]
