"""headgeom.geometry.linalg.low_rank: the in-place rank-q update against the dense batched product
written here (float64, ranks 1 and 2, views of larger tensors as the passes give them)."""
import pytest
import torch

from headgeom.geometry.linalg.low_rank import add_low_rank_

DT = torch.float64


@pytest.mark.parametrize("q", [1, 2])
@pytest.mark.parametrize("value", [1.0, -1.0, 0.5])
def test_the_update_equals_the_dense_product(q, value):
    g = torch.Generator().manual_seed(q)
    out = torch.randn(3, 4, 6, dtype=DT, generator=g)
    left = torch.randn(3, 4, q, dtype=DT, generator=g)
    right = torch.randn(3, 6, q, dtype=DT, generator=g)
    expected = out + value * torch.bmm(left, right.transpose(1, 2))
    result = add_low_rank_(out, left, right, value=value)
    assert result is out
    torch.testing.assert_close(out, expected, rtol=1e-14, atol=1e-14)


def test_a_slice_of_a_larger_output_is_updated_alone():
    g = torch.Generator().manual_seed(0)
    big = torch.randn(5, 4, 6, dtype=DT, generator=g)
    before = big.clone()
    left, right = torch.randn(2, 4, 2, dtype=DT, generator=g), torch.randn(2, 6, 2, dtype=DT, generator=g)
    add_low_rank_(big[1:3], left, right)
    torch.testing.assert_close(big[1:3], before[1:3] + left @ right.transpose(1, 2), rtol=1e-14, atol=1e-14)
    assert torch.equal(big[0], before[0]) and torch.equal(big[3:], before[3:])
