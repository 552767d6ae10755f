"""weighted_gram against per-sample products Aᵀ diag(c_i) A written out in the test."""
from __future__ import annotations

import pytest
import torch

from headgeom.geometry import weighted_gram as wg
from headgeom.geometry.weighted_gram import weighted_gram

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
