"""The training progress bar says what it is doing between steps, and its clock counts steps only.

The loop's tqdm bar counts optimisation steps. Work between two steps (a geometry tracking call,
which can take minutes on a large probe, or a checkpoint) runs inside :func:`paused`: the bar's
description names the work while it runs (``tracking geometry at step 0: 0/200 ...`` instead of a
silent ``0/200 [00:00<?]``), and the time it takes is taken off the bar's clock, so the elapsed
time, the rate and the ETA are those of the steps alone and do not swing after each call. The
ETA therefore leaves out the time of the remaining tracking calls; ``done.json``'s ``seconds``
is the wall time of the whole session.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["paused"]


@contextlib.contextmanager
def paused(bar: Any, what: str) -> Iterator[None]:
    """Show ``what`` as ``bar``'s description during the block and leave the block's time out of
    the bar's elapsed time and rate (a ``tqdm`` bar; nothing happens when it is disabled)."""
    if bar.disable:  # a disabled tqdm keeps no clock
        yield
        return
    before = bar.desc
    bar.set_description_str(what, refresh=True)
    start = time.time()  # tqdm's clock
    try:
        yield
    finally:
        spent = time.time() - start
        # tqdm's elapsed is now - start_t and its rate is steps / (now - last_print_t) (smoothed):
        # moving both forward by the pause removes it from both.
        bar.start_t += spent
        bar.last_print_t += spent
        bar.set_description_str(before, refresh=True)
