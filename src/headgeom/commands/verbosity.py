"""Third-party INFO logging stays out of the console unless asked for (``--verbose`` or
``HEADGEOM_VERBOSE=1``).

headgeom says what it does in its own lines (progress bars, one-line errors) and logs nothing through
:mod:`logging`; libraries it drives do, at INFO (MLflow's ``Creating initial MLflow database
tables...`` when ``--logger mlflow`` opens a store, Lightning's accelerator summary). While a command
runs, :func:`third_party_logs` holds every logger below WARNING (``logging.disable``, which outranks
the levels and handlers libraries set for themselves on import) and sets ``MLFLOW_LOGGING_LEVEL=WARNING``
for the processes it starts (``headgeom reproduce --jobs``' workers, where MLflow configures its
logger when it is imported), unless the user set it. Warnings and errors always show. The Python API
changes no logging.
"""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

__all__ = ["VERBOSE_ENV", "third_party_logs", "verbose_requested"]

VERBOSE_ENV = "HEADGEOM_VERBOSE"
QUIET_ENV = {"MLFLOW_LOGGING_LEVEL": "WARNING"}
"""Read by the libraries when they are imported, in this process and the workers it spawns."""


def verbose_requested(flag: bool = False) -> bool:
    """``--verbose`` given, or ``$HEADGEOM_VERBOSE`` set to anything but "", "0" or "false"."""
    return flag or os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false")


@contextlib.contextmanager
def third_party_logs(verbose: bool) -> Iterator[None]:
    """Within the block, INFO and DEBUG records of every logger are dropped unless ``verbose``;
    the logging state and the environment are put back afterwards."""
    if verbose:
        yield
        return
    set_here = [k for k in QUIET_ENV if k not in os.environ]
    before = logging.root.manager.disable
    os.environ.update({k: QUIET_ENV[k] for k in set_here})
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(before)
        for k in set_here:
            os.environ.pop(k, None)
