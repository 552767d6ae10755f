"""The figures of the registered experiments, one module per experiment, named as the experiment
module is (``headgeom.report.plots.c1_whitening`` draws C1's figures); beside them those of
``headgeom analyze`` (:mod:`~headgeom.report.plots.orbits`, from the panels headgeom.orbits.pca
computes) and of a run's tracked metrics (:mod:`~headgeom.report.plots.tracking`, which
headgeom.tracking.plot_run writes). Only this package and headgeom.report.trajectories build
figures (tests/test_layering.py).

A figure function takes plain data (lists, dicts of numbers, the experiment's settings as
values) and returns a ``matplotlib.figure.Figure`` built with :mod:`headgeom.report.style`; it
computes nothing the experiment's summary did not already compute, and imports nothing from
``headgeom.experiments`` (nor headgeom.orbits or headgeom.tracking). The experiment's
``Summary.figures`` holds closures calling these functions; the runner saves them
(:mod:`headgeom.report.figures`).
"""
