"""What the fuzz targets of files share (tests/*/test_*_fuzz.py): the example budget, damaged copies
of a real file (truncations and mutated bytes), a pickled object whose unpickling would leave a
marker file, the one-line check of an error, and a sandbox folder whose contents are compared
before and after (nothing written outside the output folder).

CI runs a fixed, small set of examples (derandomized: the same every run, so the suite cannot
flake); ``HEADGEOM_FUZZ_SCALE=N`` runs N times as many, freshly random, for a longer search.
``deadline=None`` so that a loaded machine cannot fail a slow example, ``database=None`` so that
nothing is written into the checkout.
"""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SCALE = int(os.environ.get("HEADGEOM_FUZZ_SCALE", "1"))


def budget(examples: int) -> settings:
    """``examples`` at SCALE 1 (the same every run), ``examples * SCALE`` fresh ones otherwise."""
    return settings(max_examples=examples * SCALE, derandomize=SCALE == 1, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def damaged(draw, good: bytes) -> bytes:
    """``good`` cut at any length, or with 1-3 edits: bytes flipped or overwritten, a span deleted,
    repeated or inserted, junk appended. Offsets are drawn over the whole file, so both the
    container's structure and the payload get hit."""
    data = bytearray(good)
    if draw(st.booleans()):
        return bytes(data[:draw(st.integers(0, max(len(data) - 1, 0)))])
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        kind = draw(st.sampled_from(["flip", "overwrite", "delete", "repeat", "insert", "append"]))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at:at + len(chunk)] = chunk
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data += draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


class RunsCode:
    """Unpickling this runs a shell command that creates ``marker`` (so its absence shows nothing ran)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def one_line(message: str) -> str:
    """``message`` when it is one non-empty line without a traceback, else an AssertionError."""
    assert message.strip() and "\n" not in message.strip() and "\r" not in message, message
    assert "Traceback" not in message, message
    return message.strip()


def listing(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` with its size (what a run may not have changed)."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}
