"""Lanczos on the engine's matrix-free H_eff against exact eigh of its blocks (dimension 2,000)."""
import torch

from headgeom.geometry import effective_hessian, spectrum
from headgeom.heads import head_from
from headgeom.objectives import mse_to_target


def test_lanczos_on_h_eff_operator_matches_block_eigh_with_negative_dominant_eigenvalue():
    torch.manual_seed(0)
    head = head_from("20-48-32:tanh").double()
    z = torch.randn(100, 20, dtype=torch.float64)  # N·d = 2,000
    c = torch.randn(100, 32, dtype=torch.float64)
    # a concave loss: the largest-magnitude eigenvalue of H_eff is negative, where power
    # iteration on H - λ_max I (the authors' estimator) returns the wrong end
    eh = effective_hessian(head, lambda u: -mse_to_target(u, c), z)
    assert eh.separable_loss and eh.row_wise_head  # H_eff is block-diagonal: eigh of blocks is exact
    exact = torch.linalg.eigvalsh(eh.blocks()).reshape(-1).sort().values
    assert exact[0].abs() > exact[-1].abs() and exact[0] < 0
    s = spectrum(eh.operator("H"), k=2, tol=1e-12)
    assert s.method["converged"]
    scale = exact.abs().max()
    assert abs(s.lambda_min - exact[0]) <= 1e-8 * scale
    assert abs(s.lambda_max - exact[-1]) <= 1e-8 * scale
