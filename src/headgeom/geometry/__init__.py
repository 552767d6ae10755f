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
