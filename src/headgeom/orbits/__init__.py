"""Augmentation orbits through the backbone and every head layer (docs/paper.md §3).

- :mod:`~headgeom.orbits.metrics`: pure metrics on orbit features (N, K, D).
- :mod:`~headgeom.orbits.selective`: global spread, selectivity, centred spreads and the mean
  pairwise cosine, as statistics of bootstrap-weighted images.
- :mod:`~headgeom.orbits.bootstrap`: BCa bootstrap over images (stratified jackknife for the
  acceleration), ratios resampled jointly; no interval when the bootstrap is bias-dominated.
- :mod:`~headgeom.orbits.extract`: orbit features of a backbone and its heads (raw or l2 z).
- :mod:`~headgeom.orbits.controls`: fresh-head and random-direction controls.
- :mod:`~headgeom.orbits.analyze`: ``analyze_orbits`` -> JSON-able dict with CIs.
- :mod:`~headgeom.orbits.pca`: 2-D PCA projections of orbits, the data of their figures (drawn by
  headgeom.report.plots.orbits).
- :mod:`~headgeom.orbits.tangent_metric`: Rayleigh quotients on augmentation tangents (C6) and
  Fisher ranks (C7) of real models; :func:`plot_tangent_spectra` (headgeom.report.plots.orbits,
  re-exported here) plots them.
- :mod:`~headgeom.orbits.cli`, :mod:`~headgeom.orbits.model_input`, :mod:`~headgeom.orbits.pipeline`,
  :mod:`~headgeom.orbits.report`: ``headgeom analyze``; :mod:`~headgeom.orbits.external`: its
  input of orbit embeddings computed elsewhere (``FILE.npz``).
"""

from headgeom.orbits.analyze import DEFINITIONS, analyze_orbit_features, analyze_orbits
from headgeom.orbits.extract import OrbitFeatures, extract_orbits
from headgeom.orbits.tangent_metric import tangent_metric_analysis
from headgeom.report.plots.orbits import plot_tangent_spectra

__all__ = ["DEFINITIONS", "OrbitFeatures", "analyze_orbit_features", "analyze_orbits",
           "extract_orbits", "plot_tangent_spectra", "tangent_metric_analysis"]
