"""Independent float64 references for the effective-Hessian tests.

Written with torch.autograd.functional (not torch.func) and explicit loops over output
components, so they share no code path with headgeom.geometry.
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian


def reference_parts(head: nn.Module, loss, z: torch.Tensor, reading: str = "ambient"):
    """(H_eff, G, M) as dense (N·d, N·d) float64 matrices."""
    head = copy.deepcopy(head)  # the reference may update running statistics; keep the original clean
    n, d = z.shape
    zf = z.reshape(-1).clone()
    h = lambda x: head(x.reshape(n, d)).reshape(-1)  # noqa: E731
    u = h(zf).detach()
    k = u.numel() // n
    full = hessian(lambda x: loss(h(x).reshape(n, k)), zf)
    jac = jacobian(h, zf)  # (N·k, N·d)
    hu = hessian(lambda v: loss(v.reshape(n, k)), u)  # (N·k, N·k)
    if reading == "tangential":
        p = torch.zeros(n * k, n * k, dtype=z.dtype)
        for i in range(n):
            ui = u[i * k:(i + 1) * k]
            p[i * k:(i + 1) * k, i * k:(i + 1) * k] = torch.eye(k, dtype=z.dtype) - torch.outer(ui, ui) / ui.dot(ui)
        hu = p @ hu @ p
    g = jac.T @ hu @ jac
    u_req = u.clone().requires_grad_(True)
    (rho,) = torch.autograd.grad(loss(u_req.reshape(n, k)), u_req)
    m = torch.zeros(n * d, n * d, dtype=z.dtype)
    for j in range(n * k):
        if rho[j] != 0:
            m += rho[j] * hessian(lambda x, j=j: h(x)[j], zf)
    if reading == "ambient":
        return full, g, m
    return g + m, g, m


def diagonal_blocks(dense: torch.Tensor, n: int, d: int) -> torch.Tensor:
    four = dense.reshape(n, d, n, d)
    return torch.stack([four[i, :, i, :] for i in range(n)])


def assert_close(actual: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-6, atol: float = 1e-10, what: str = ""):
    """assert_close that prints the entries that differ most."""
    diff = (actual - expected).abs()
    bad = diff > atol + rtol * expected.abs()
    if bad.any():
        worst = torch.topk(diff.reshape(-1), min(5, diff.numel())).indices
        rows = [(tuple(int(i) for i in torch.unravel_index(w, diff.shape)), float(actual.reshape(-1)[w]), float(expected.reshape(-1)[w]))
                for w in worst]
        raise AssertionError(f"{what}: {int(bad.sum())} entries differ; worst (index, got, expected): {rows}")
