"""Reports of ``headgeom reproduce``: markdown (report.md), the same as one self-contained page
(report.html, :mod:`headgeom.report.html`) and figures (PNG, Agg backend).

Plotting stays apart from computing: experiments hand figure builders to the runner, which
saves them here; the markdown writer reads only the results.json content, and so does the terminal summary
(:mod:`headgeom.report.terminal`). Every view leads with the claims' bottom lines
(:mod:`headgeom.report.bottom_lines`). Every figure takes its
series styles, legend placement, symlog ticks, chance lines and round-off band from
:mod:`headgeom.report.style`; :mod:`headgeom.report.plots` holds each experiment's figures (one module
per experiment), those of ``headgeom analyze`` (``plots.orbits``) and of a run's tracked metrics
(``plots.tracking``), and :mod:`headgeom.report.trajectories` the training trajectories they share.
"""
from .figures import figure_file_name, figure_png_bytes, make_figure, save_figure, use_agg
from .html import render_html, write_html
from .markdown import claims_table, format_measured, render_report, write_report
from .terminal import format_claims_short, terminal_summary

__all__ = ["claims_table", "figure_file_name", "figure_png_bytes", "format_claims_short", "format_measured",
           "make_figure", "render_html", "render_report", "save_figure", "terminal_summary", "use_agg", "write_html",
           "write_report"]
