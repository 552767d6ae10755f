"""``headgeom train`` in a process that a test signals at a known step (tests/train/test_train_faults.py).

    python tests/train_held_worker.py HOLD_STEP MARKER train ARGS...

runs ``headgeom ARGS`` as the command line does, except that step HOLD_STEP (1-based), before its
update, writes MARKER and waits until the command's signal handler
(:class:`headgeom.train.interrupt.StopSignals`) has received a signal. The test sends the signal
once MARKER exists, so the run is stopped at that step however fast or slow the machine is (an
event, not a race between the test and the training).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import headgeom.train.cli as train_cli
import headgeom.train.loop as loop
from headgeom.cli import main

hold, marker, argv = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
handlers: list[train_cli.StopSignals] = []


class RecordedStopSignals(train_cli.StopSignals):
    def __enter__(self):
        handlers.append(self)
        return super().__enter__()


real_lr_at = loop.lr_at


def held_lr_at(schedule, step, *args):
    if step + 1 == hold:  # the loop asks for the learning rate of each step before its update
        marker.touch()
        while handlers[-1].received is None:
            time.sleep(0.01)
    return real_lr_at(schedule, step, *args)


train_cli.StopSignals = RecordedStopSignals
loop.lr_at = held_lr_at
sys.exit(main(argv))
