"""The figures of the registered experiments, one module per experiment, named as the experiment
module is (``headgeom.report.plots.c1_whitening`` draws C1's figures).

A figure function takes plain data (lists, dicts of numbers, the experiment's settings as
values) and returns a ``matplotlib.figure.Figure`` built with :mod:`headgeom.report.style`; it
computes nothing the experiment's summary did not already compute, and imports nothing from
``headgeom.experiments``. The experiment's ``Summary.figures`` holds closures calling these
functions; the runner saves them (:mod:`headgeom.report.figures`).
"""
