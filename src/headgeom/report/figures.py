"""Saving experiment figures as PNG with matplotlib's Agg backend (no display needed).

An experiment's ``Summary.figures`` holds ``(name, build)`` pairs; ``build`` is called with no
argument (a closure over the results, as ``Summary`` types it) or, when it takes one, with the
results list ``[(cell, metrics)]`` (as the registry's docstring describes), and returns a
``matplotlib.figure.Figure``. The runner saves it to ``OUT/figures/<ID>_<name>.png`` and closes it.
"""
from __future__ import annotations

import inspect
import io
import os
import re
from pathlib import Path
from typing import Any, Callable

from headgeom.io import atomic_write_bytes

DPI = 120


def use_agg() -> None:
    """Select matplotlib's Agg backend: headless PNGs on servers and CI, no window ever opens.

    The runner calls this before importing experiment modules (a library import of
    ``headgeom.report`` alone leaves the user's backend untouched)."""
    import matplotlib  # heavy: only when a figure will be drawn (headgeom.report.style's docstring)

    matplotlib.use("Agg")


def figure_file_name(experiment_id: str, name: str) -> str:
    """``<ID>_<name>.png`` with the name made filesystem-safe (a trailing .png is dropped)."""
    stem = re.sub(r"\.png$", "", str(name), flags=re.IGNORECASE)
    stem = re.sub(r"[^A-Za-z0-9_.+-]+", "_", stem).strip("_.")
    if not stem:
        raise ValueError(f"figure name {name!r} of {experiment_id} has no usable characters; use e.g. 'spectra'")
    return f"{experiment_id}_{stem}.png"


def make_figure(build: Callable[..., Any], results: list[tuple[dict, dict]]) -> Any:
    """Call a figure builder (with no argument, or with ``results`` when it takes one)."""
    try:
        params = [p for p in inspect.signature(build).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    fig = build(results) if params else build()
    if not hasattr(fig, "savefig"):
        raise TypeError(f"figure builder returned {type(fig).__name__}; it must return a matplotlib Figure")
    return fig


def figure_png_bytes(fig: Any, bbox_inches: str | None = "auto") -> bytes:
    """PNG bytes of ``fig`` at :data:`DPI`; the figure is closed after (a figure of
    :func:`headgeom.report.style.new_figure` belongs to no backend: nothing to close).

    ``bbox_inches="auto"``: a figure with a layout engine (every figure of headgeom.report.style)
    is saved as laid out, its whole canvas, which is what the figure tests check (its suptitle wraps
    to that canvas; cropping to the drawn content would undo the wrap); any other figure is cropped
    to its drawn content (``"tight"``). Other values go to ``savefig``."""
    if bbox_inches == "auto":
        bbox_inches = None if fig.get_layout_engine() is not None else "tight"
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches=bbox_inches)
    finally:
        if fig.canvas.manager is not None:  # a pyplot figure: release it from pyplot's registry
            import matplotlib.pyplot as plt  # only here: importing pyplot picks a backend

            plt.close(fig)
    return buf.getvalue()


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (temporary file + os.replace) and close it."""
    path = Path(path)
    atomic_write_bytes(path, figure_png_bytes(fig))
    return path
