"""The Figure class of headgeom's figures (made by :func:`headgeom.report.style.new_figure` and
``blank_figure``): matplotlib's constrained layout, redone at every draw, and a suptitle that wraps
to the canvas instead of running off it when the figure is narrow (a panel or two).

This module imports matplotlib at the top; :mod:`headgeom.report.style` imports it only when a
figure is made (see its docstring)."""
from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

LAYOUT = "constrained"
"""matplotlib's layout engine: room for titles, suptitle, axis and tick labels and the legends
outside the axes, so that no text runs into another or off the canvas."""


class LaidOutFigure(Figure):
    """A Figure with the constrained layout whose suptitle wraps to the canvas (``wrap=True``
    unless the caller says otherwise)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("layout", LAYOUT)
        super().__init__(*args, **kwargs)

    def suptitle(self, t: str, **kwargs: Any) -> Any:
        kwargs.setdefault("wrap", True)
        return super().suptitle(t, **kwargs)
