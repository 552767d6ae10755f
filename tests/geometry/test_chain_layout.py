"""The chain's per-sample Jacobians reach each Linear in a layout that folds into one GEMM.

A Linear after a nonlinear layer multiplies the per-sample transposed Jacobians (s, d, w) by the
shared Wᵀ; torch folds that into one (s·d, w) × (w, w') product only when the batch is laid out
row-major. A transposed view of the first weight passed its strides on through the broadcast
scalings of every layer kind, and the product ran as a batched one against an expanded Wᵀ (a third
of the rate, BENCHMARKS.md "Layer kinds on the structured path"). Checked on the operations the
pass dispatches (no timing), with J_i and M_i against float64 autograd alongside.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from headgeom.geometry.engine.chain import chain_pass, fuse_affine_runs, flatten_layers

DT = torch.float64
KINDS = {"silu": lambda h: nn.SiLU(), "layernorm": lambda h: nn.LayerNorm(h), "rmsnorm": lambda h: nn.RMSNorm(h),
         "groupnorm": lambda h: nn.GroupNorm(4, h), "glu": lambda h: nn.GLU()}


class BatchedAgainstShared(TorchDispatchMode):
    """Records each batched product whose second operand is one matrix expanded over the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.bmm.default, torch.ops.aten.bmm.out) and args[1].stride(0) == 0:
            self.found.append((tuple(args[0].shape), tuple(args[0].stride()), tuple(args[1].shape)))
        return func(*args, **(kwargs or {}))


def head_of(kind: str, d: int = 6, h: int = 8, k: int = 5) -> nn.Module:
    middle = KINDS[kind](h)
    width = h // 2 if kind == "glu" else h
    return nn.Sequential(nn.Linear(d, h), middle, nn.Linear(width, k)).to(DT).eval()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_linear_after_a_nonlinear_layer_is_one_gemm(kind):
    torch.manual_seed(0)
    head = head_of(kind)
    layers = fuse_affine_runs(flatten_layers(head, (4, 6)))
    z, rho = torch.randn(4, 6, dtype=DT), torch.randn(4, 5, dtype=DT)
    with BatchedAgainstShared() as mode:
        out = chain_pass(layers, z, rho)
    assert mode.found == [], f"{kind}: batched products against an expanded weight: {mode.found}"
    # and the pass is still exact, per sample: J_iᵀ, and M_i = ∇²_z ⟨ρ_i, head(z_i)⟩ (its first term
    # is now written, the others added), against autograd
    for i in range(z.shape[0]):
        jac = torch.autograd.functional.jacobian(lambda x: head(x[None])[0], z[i])
        torch.testing.assert_close(out.jt[i], jac.T, rtol=1e-12, atol=1e-13)
        second = torch.autograd.functional.hessian(lambda x: (rho[i] * head(x[None])[0]).sum(), z[i])
        torch.testing.assert_close(out.interaction[i], second, rtol=1e-10, atol=1e-12)


def test_two_nonlinear_layers_add_their_terms():
    torch.manual_seed(1)
    head = nn.Sequential(nn.Linear(6, 8), nn.RMSNorm(8), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 5)).to(DT).eval()
    layers = fuse_affine_runs(flatten_layers(head, (3, 6)))
    z, rho = torch.randn(3, 6, dtype=DT), torch.randn(3, 5, dtype=DT)
    out = chain_pass(layers, z, rho)
    for i in range(3):
        second = torch.autograd.functional.hessian(lambda x: (rho[i] * head(x[None])[0]).sum(), z[i])
        torch.testing.assert_close(out.interaction[i], second, rtol=1e-10, atol=1e-12)
