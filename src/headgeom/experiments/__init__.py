"""Registered experiments (one module per claim, ``cN_name.py``) and the runner."""
from .registry import CLAIM_KEYS, EXPERIMENTS, VERDICTS, Experiment, Summary, load_all, measured, register

__all__ = ["CLAIM_KEYS", "EXPERIMENTS", "VERDICTS", "Experiment", "Summary", "load_all", "measured", "register"]
