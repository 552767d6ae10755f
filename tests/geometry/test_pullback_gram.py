"""pullback_gram: G(z) = J_hᵀJ_h per sample, through the last Linear's R factor for heads wider at
the output than at its input (DINO), directly otherwise; every path against JᵀJ of a dense
float64 reverse-mode Jacobian of the whole head, taken one row at a time."""
import pytest
import torch
from torch import nn
from torch.autograd.functional import jacobian

from headgeom.geometry.invariance.pullback_gram import pullback_gram
from headgeom.heads import head_from

pytestmark = pytest.mark.usefixtures("one_thread")

RTOL = 1e-11  # of max |G|: float64 Grams of d ≤ 12 columns


def _reference(fn, z: torch.Tensor) -> torch.Tensor:
    jacs = [jacobian(lambda r: fn(r.unsqueeze(0)).squeeze(0), row) for row in z]  # (k, d) each
    return torch.stack([j.T @ j for j in jacs])


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    err = (got - want).abs().max().item()
    assert err <= RTOL * want.abs().max().item(), f"max abs error {err:.3g}, scale {want.abs().max().item():.3g}"


def _eval64(m: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    m = m.double().eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm1d):
                mod.running_mean.normal_()
                mod.running_var.uniform_(0.5, 2.0)
    return m


def _z(n: int, d: int) -> torch.Tensor:
    return torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(n + d))


def test_dino_head_takes_the_factored_path():
    head = _eval64(head_from("10-24-24-40:gelu:dino=6:nonormlast"), seed=0)
    with torch.no_grad():  # a trained weight-normed layer: g is not 1
        head.layers[-1].parametrizations.weight.original0.uniform_(0.5, 2.0)
    z = _z(5, 10)
    g = pullback_gram(head)
    assert g.r is not None and g.r.shape == (6, 6) and "(40, 6)" in g.path
    _close(g(z), _reference(head, z))


def test_bn_head_with_plain_wide_last_layer_and_chunking():
    head = _eval64(nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.GELU(), nn.Linear(16, 30, bias=False)), 1)
    z = _z(7, 12)
    g = pullback_gram(head, max_elements=16 * 12 * 2)  # two samples per Jacobian chunk
    assert g.r is not None
    _close(g(z), _reference(head, z))


@pytest.mark.parametrize("case", ["last_bn", "narrowing_last", "callable", "chain"])
def test_direct_path_and_chains(case):
    proj = _eval64(head_from("8-16-16:relu:bn:last=bn_noaffine"), seed=2)  # last leaf: BatchNorm
    pred = _eval64(head_from("16-4-24:relu"), seed=3)  # last Linear 4 -> 24: factored
    head = {"last_bn": proj, "narrowing_last": _eval64(head_from("8-16-6:relu"), 4),
            "callable": lambda x: torch.tanh(x) @ torch.ones(8, 20, dtype=torch.float64), "chain": [proj, pred]}[case]
    fn = (lambda x: pred(proj(x))) if case == "chain" else head
    g = pullback_gram(head)
    assert (g.r is None) == (case != "chain"), g.path
    z = _z(4, 8)
    _close(g(z), _reference(fn, z))


def test_rows_only():
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        pullback_gram(nn.Linear(3, 5).double())(torch.zeros(3, dtype=torch.float64))
