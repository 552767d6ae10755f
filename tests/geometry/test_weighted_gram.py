"""weighted_gram against per-sample products Aᵀ diag(c_i) A written out in the test."""
from __future__ import annotations

import pytest
import torch

from headgeom.geometry import weighted_gram as wg
from headgeom.geometry.linalg.weighted_gram import symmetric_bmm, upper_fraction, weighted_gram

from geometry_reference import assert_close

DT = torch.float64


def reference(at: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.stack([at @ torch.diag(ci) @ at.T for ci in c])


@pytest.mark.parametrize("tile", [1, 2, 3, 5, 64])
@pytest.mark.parametrize("n", [1, 4])
def test_row_tiles(tile, n):
    # tiles that divide d, leave a short last tile, and cover d at once
    g = torch.Generator().manual_seed(1)
    at = torch.randn(5, 9, generator=g, dtype=DT)  # Aᵀ (d, w)
    c = torch.randn(n, 9, generator=g, dtype=DT)
    assert_close(weighted_gram(at, c, tile=tile), reference(at, c), rtol=1e-12, atol=1e-13)


def test_into_a_slice_of_a_larger_tensor():
    g = torch.Generator().manual_seed(2)
    at = torch.randn(5, 9, generator=g, dtype=DT)
    c = torch.randn(3, 9, generator=g, dtype=DT)
    out = torch.full((5, 5, 5), float("nan"), dtype=DT)
    weighted_gram(at, c, out=out[1:4], tile=2)
    assert_close(out[1:4], reference(at, c), rtol=1e-12, atol=1e-13)
    assert torch.isnan(out[0]).all() and torch.isnan(out[4]).all()


@pytest.mark.parametrize("budget_samples", [1, 2])
def test_samples_in_groups_when_the_buffer_is_bounded(monkeypatch, budget_samples):
    # a buffer of one or two samples' tile: 5 samples in groups of 1 or 2 (a short last group)
    g = torch.Generator().manual_seed(3)
    at = torch.randn(6, 7, generator=g, dtype=DT)
    c = torch.randn(5, 7, generator=g, dtype=DT)
    monkeypatch.setattr(wg, "BUFFER_BYTES", budget_samples * 4 * 7 * 8)
    assert_close(weighted_gram(at, c, tile=4), reference(at, c), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("tile", [1, 3, 4, 64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_symmetric_bmm_against_the_full_product(tile, accumulate):
    # X_i = P_i K_i with K_i symmetric: X_i P_iᵀ is symmetric; tiles that divide d, leave a short
    # last tile, and cover d at once; into a slice, adding to what is there or replacing it
    g = torch.Generator().manual_seed(4)
    s, d, m = 3, 8, 5
    p = torch.randn(s, d, m, generator=g, dtype=DT)
    k = torch.randn(s, m, m, generator=g, dtype=DT)
    x = p @ (k + k.transpose(1, 2))
    before = torch.randn(s + 2, d, d, generator=g, dtype=DT)
    out = before.clone()
    symmetric_bmm(x, p, out[1:4], accumulate=accumulate, tile=tile)
    want = x @ p.transpose(1, 2) + (before[1:4] if accumulate else 0)
    assert_close(out[1:4], want, rtol=1e-12, atol=1e-13)
    assert torch.equal(out[0], before[0]) and torch.equal(out[4], before[4])


def test_symmetric_bmm_reads_only_the_upper_triangle():
    # a product that is not symmetric comes back as its upper triangle mirrored: the lower one is never formed
    g = torch.Generator().manual_seed(5)
    x, p = torch.randn(2, 6, 4, generator=g, dtype=DT), torch.randn(2, 6, 4, generator=g, dtype=DT)
    got = symmetric_bmm(x, p, torch.empty(2, 6, 6, dtype=DT), tile=1)
    full = x @ p.transpose(1, 2)
    upper = torch.triu(full)
    assert_close(got, upper + torch.triu(full, 1).transpose(1, 2), rtol=1e-12, atol=1e-13)


def test_upper_fraction_counts_the_entries_the_tiles_multiply():
    # written out for d = 8, tile 3: rows 0-2 × columns 0-7, rows 3-5 × 3-7, rows 6-7 × 6-7
    assert upper_fraction(8, 3) == (3 * 8 + 3 * 5 + 2 * 2) / 64
    assert upper_fraction(10, 1) == 55 / 100  # the triangle with its diagonal
    assert upper_fraction(10, 10) == upper_fraction(10, 64) == 1.0  # one tile: the full product
