"""Exact geometry of projection heads: H_eff = G + M, its blocks, operators and spectra.

Four rooms, imports running one way (``tests/test_layering.py``): ``linalg`` (operators, Lanczos,
spectra, thresholds) ← ``layers`` (the chain layers and their rules) ← ``engine`` (facts,
dispatch, strategies, passes); ``invariance`` (tangents, Fisher ranks) beside them; ``cli`` is
the ``headgeom hessian`` command. The names below are the public surface.
"""
from .engine.effective_hessian import EffectiveHessian, effective_hessian
from .engine.head_cache import HeadCache
from .engine.readings import READINGS, loss_hvp
from .invariance.fisher import GaussianObservation, fisher_information, fisher_rank, null_space_fraction, numerical_rank
from .invariance.tangents import (JacobianMetric, augmentation_tangent, quotient_contrast, random_unit_directions,
                                  rayleigh_quotients)
from .linalg.lanczos import lanczos_extremes
from .linalg.operators import SymmetricOperator
from .linalg.spectrum import Spectrum, spectrum
from .old_paths import install as _install_old_paths

__all__ = ["EffectiveHessian", "effective_hessian", "HeadCache", "READINGS", "loss_hvp",
           "SymmetricOperator", "Spectrum", "spectrum", "lanczos_extremes",
           "GaussianObservation", "fisher_information", "fisher_rank", "null_space_fraction", "numerical_rank",
           "JacobianMetric", "augmentation_tangent", "quotient_contrast", "random_unit_directions",
           "rayleigh_quotients"]

_install_old_paths()
