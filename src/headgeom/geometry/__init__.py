"""Exact geometry of projection heads: H_eff = G + M, its blocks, operators and spectra."""
from .effective_hessian import EffectiveHessian, effective_hessian
from .readings import READINGS, loss_hvp

__all__ = ["EffectiveHessian", "effective_hessian", "READINGS", "loss_hvp"]

try:  # spectra live in their own modules; re-exported once present
    from .operators import SymmetricOperator
    from .spectrum import Spectrum, spectrum
    from .lanczos import lanczos_extremes

    __all__ += ["SymmetricOperator", "Spectrum", "spectrum", "lanczos_extremes"]
except ImportError:  # pragma: no cover - during development only
    pass

from .fisher import GaussianObservation, fisher_information, fisher_rank, null_space_fraction, numerical_rank
from .tangents import JacobianMetric, augmentation_tangent, quotient_contrast, random_unit_directions, rayleigh_quotients

__all__ += ["GaussianObservation", "fisher_information", "fisher_rank", "null_space_fraction", "numerical_rank",
            "JacobianMetric", "augmentation_tangent", "quotient_contrast", "random_unit_directions",
            "rayleigh_quotients"]
