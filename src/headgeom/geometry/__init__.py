"""Exact geometry of projection heads: H_eff = G + M, its blocks, operators and spectra."""
from .effective_hessian import EffectiveHessian, effective_hessian
from .head_cache import HeadCache
from .fisher import GaussianObservation, fisher_information, fisher_rank, null_space_fraction, numerical_rank
from .lanczos import lanczos_extremes
from .operators import SymmetricOperator
from .readings import READINGS, loss_hvp
from .spectrum import Spectrum, spectrum
from .tangents import JacobianMetric, augmentation_tangent, quotient_contrast, random_unit_directions, rayleigh_quotients

__all__ = ["EffectiveHessian", "effective_hessian", "HeadCache", "READINGS", "loss_hvp",
           "SymmetricOperator", "Spectrum", "spectrum", "lanczos_extremes",
           "GaussianObservation", "fisher_information", "fisher_rank", "null_space_fraction", "numerical_rank",
           "JacobianMetric", "augmentation_tangent", "quotient_contrast", "random_unit_directions",
           "rayleigh_quotients"]
