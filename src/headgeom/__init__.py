"""headgeom: the exact geometry of SSL projection heads.

H_eff = G + M, the Hessian of an SSL loss with respect to the backbone representation z,
split into the pullback metric G = J_hᵀ ∇²_u L J_h and the interaction term
M = Σ_i ρ_i ∇²_z h_i with ρ = ∇_u L (docs/paper.md §1).
"""

__version__ = "0.3.0"
