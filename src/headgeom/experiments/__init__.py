"""Registered experiments (one module per claim or experiment: ``cN_name.py``, ``collapse_grid.py``,
...; every module here but the machinery registers itself) and the runner."""
from .registry import CLAIM_KEYS, EXPERIMENTS, VERDICTS, Experiment, Summary, load_all, measured, register

__all__ = ["CLAIM_KEYS", "EXPERIMENTS", "VERDICTS", "Experiment", "Summary", "load_all", "measured", "register"]
