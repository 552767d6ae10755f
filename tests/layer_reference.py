"""Checks of one chain layer kind against independent float64 references (the layer tests' helpers).

- :func:`assert_layer_matches_autograd`: a module's chain (its rule's output) against
  torch.autograd.functional on the module itself, row by row: u, J_iᵀ and M_i = ∇²⟨ρ_i, f(x_i)⟩ from
  the structured chain pass, and every product of the layer protocol (pull of shared and per-sample
  Jacobians, the interaction term written and added, the sandwich Jᵀ K J, the middle factor) against
  the same dense J and S.
- :func:`assert_head_exact`: a head's H_eff, G and M blocks by the engine (both strategies, the
  merged and the decomposed queries) against tests/geometry_reference.py's dense float64 reference.

Tolerances: relative to the largest reference entry, 1e-10 unless the caller says otherwise.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.chain import chain_pass, fuse_affine_runs
from headgeom.geometry.layers import layer_of
from headgeom.objectives import analysis_loss

from geometry_reference import diagonal_blocks, reference_parts

DT = torch.float64
REL = 1e-10


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got − want| / max |want| (the absolute error when want is 0)."""
    scale = float(want.abs().max())
    return float((got - want).abs().max()) / (scale if scale > 0 else 1.0)


def _assert_rel(got: torch.Tensor, want: torch.Tensor, what: str, rel: float = REL) -> None:
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    err = relative_error(got, want)
    assert err <= rel, f"{what}: relative error {err:.3g} > {rel:g}"


def assert_layer_matches_autograd(module: nn.Module, layers: list[nn.Module], width: int, seed: int,
                                  what: str, rows: int = 3) -> None:
    """The chain ``layers`` of ``module`` (inputs of ``width``) against autograd on the module."""
    gen = torch.Generator().manual_seed(seed)
    x = 1.5 * torch.randn(rows, width, generator=gen, dtype=DT)
    with torch.no_grad():
        u = module(x)
    rho = torch.randn(u.shape, generator=gen, dtype=DT)
    out = chain_pass(fuse_affine_runs(layers), x, rho)
    _assert_rel(out.u, u, f"{what}: u")
    jacs, seconds = [], []
    for i in range(rows):
        row = lambda r: module(r[None])[0]  # noqa: E731
        jacs.append(jacobian(row, x[i]))
        seconds.append(hessian(lambda r, i=i: (rho[i] * row(r)).sum(), x[i]))
        _assert_rel(out.jt[i], jacs[i].T, f"{what}: J^T row {i}")
        _assert_rel(out.interaction[i], seconds[i], f"{what}: M row {i}")
    # the protocol's products, when the module is one nonlinear layer (no γ, β after it)
    chain = fuse_affine_runs(layers)
    if len(chain) != 1 or layer_of(chain[0]).is_affine:
        return  # the products are checked through chain_pass above and the heads' blocks
    j, s = torch.stack(jacs), torch.stack(seconds)
    state = layer_of(chain[0]).forward(x)
    state.backward(rho)
    _assert_rel(state.dense_jacobian(), j, f"{what}: dense J")
    _assert_rel(state.dense_second(), s, f"{what}: dense S")
    shared = torch.randn(4, width, generator=gen, dtype=DT)
    per_row = torch.randn(rows, 4, width, generator=gen, dtype=DT)
    _assert_rel(state.pull_jt(shared), shared @ j.transpose(1, 2), f"{what}: shared P J^T")
    _assert_rel(state.pull_jt(per_row), per_row @ j.transpose(1, 2), f"{what}: P J^T")
    weight = torch.randn(5, j.shape[1], generator=gen, dtype=DT)
    _assert_rel(state.pull_through(shared, [weight]), shared @ j.transpose(1, 2) @ weight.T, f"{what}: P J^T W^T")
    for pre, name in ((shared, "shared"), (per_row, "per-row")):
        want = pre @ s @ pre.transpose(-1, -2)
        _assert_rel(state.interaction(pre), want, f"{what}: {name} P S P^T")
        into = torch.full((rows, 4, 4), 0.25, dtype=DT)
        state.interaction_into(pre, into, accumulate=True)
        _assert_rel(into, want + 0.25, f"{what}: {name} P S P^T added")
        state.interaction_into(pre, into)
        _assert_rel(into, want, f"{what}: {name} P S P^T written")
    k = torch.randn(rows, j.shape[1], j.shape[1], generator=gen, dtype=DT)
    k = k + k.transpose(1, 2)
    sandwich = j.transpose(1, 2) @ k @ j
    _assert_rel(state.sandwich(k), sandwich, f"{what}: J^T K J")

    def tail(scale, out):
        block = k if scale is None else k * scale[:, :, None] * scale[:, None, :]
        return block if out is None else out.copy_(block)

    _assert_rel(state.middle(tail, with_second=True), sandwich + s, f"{what}: J^T K J + S")
    _assert_rel(state.rows(slice(1, 2)).sandwich(k[1:2]), sandwich[1:2], f"{what}: rows")


def assert_head_exact(head: nn.Module, loss, z: torch.Tensor, what: str, reading: str = "ambient",
                      rel: float = REL, chunk_size: int = 2) -> None:
    """H_eff, G and M blocks of ``loss ∘ head`` at z by both strategies against the dense reference;
    the head must take the structured path."""
    n, d = z.shape
    ref = [diagonal_blocks(p, n, d) for p in reference_parts(head, loss, z, reading)]
    for strategy in ("sandwich", "jacobian"):
        eh = effective_hessian(head, loss, z, reading=reading, block_strategy=strategy, chunk_size=chunk_size)
        label = f"{what}/{reading}/{strategy}"
        assert eh.info()["block_path"] == "structured-mlp", f"{label}: {eh.info()['discovered_by']}"
        assert eh.block_path().startswith(strategy), f"{label}: took {eh.block_path()}"
        for part, got, want in zip("HGM", eh.decomposed_blocks(), ref):
            _assert_rel(got, want, f"{label} {part}", rel)
        _assert_rel(eh.blocks(), ref[0], f"{label} blocks()", rel)
        _assert_rel(eh.blocks(rows=[n - 1, 0]), ref[0][[n - 1, 0]], f"{label} blocks(rows)", rel)


def assert_head_exact_under_losses(head: nn.Module, n: int, d: int, seed: int, what: str) -> None:
    """:func:`assert_head_exact` at a random z (n, d) of ``seed``, under the declared negative cosine
    and MSE to random targets (ambient), and the cosine read tangential for seed 0."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=gen, dtype=DT)
    with torch.no_grad():
        k = head(z).shape[1]
    target = torch.randn(n, k, generator=gen, dtype=DT)
    assert_head_exact(head, analysis_loss("negative_cosine", target), z, f"{what}/{seed}")
    assert_head_exact(head, analysis_loss("mse", target), z, f"{what}/{seed}/mse")
    if seed == 0:
        assert_head_exact(head, analysis_loss("negative_cosine", target), z, f"{what}/{seed}", reading="tangential")


def assert_traced_head_exact(head: nn.Module, n: int, d: int, what: str) -> None:
    """A head with its own forward: found by tracing, structured and exact (:func:`assert_head_exact`)."""
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(n, d, generator=gen, dtype=DT)
    with torch.no_grad():
        k = head(z).shape[1]
    loss = analysis_loss("negative_cosine", torch.randn(n, k, generator=gen, dtype=DT))
    assert effective_hessian(head, loss, z).info()["discovered_by"] == "traced", what
    assert_head_exact(head, loss, z, what)
