"""The analysis copy of a head is reused only while a fresh copy would be identical (HeadCache).

Each test changes the head the way training code does (in place through .data, an optimizer
step, load_state_dict, a train-mode BatchNorm forward, a mode switch, a replaced layer, a changed
attribute) and checks that the next analysis equals the dense float64 reference of the changed
head, and that an unchanged head reuses its copy with results identical to an uncached run. The
cache is an object the caller owns and passes in; without one nothing is reused.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.geometry import HeadCache
from headgeom.geometry.engine.head_function import prepare_head
from headgeom.objectives import analysis_loss, negative_cosine

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N, D, W, K = 3, 4, 6, 5


def make_head(bn: bool = False) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(D, W), nn.BatchNorm1d(W), nn.SiLU(), nn.Linear(W, K)] if bn else \
        [nn.Linear(D, W), nn.SiLU(), nn.Linear(W, W), nn.Tanh(), nn.Linear(W, K)]
    return nn.Sequential(*layers).eval()  # float32, as a training run holds it


def problem():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(N, D, dtype=DT, generator=g)
    target = torch.randn(N, K, dtype=DT, generator=g)
    return z, analysis_loss("negative_cosine", target), (lambda u: negative_cosine(u, target))


def check_blocks(head, z, loss, plain_loss, cache):
    """blocks() of the cached engine against the float64 reference of the head as it is now."""
    h_ref, _, _ = reference_parts(copy.deepcopy(head).to(DT), plain_loss, z)
    assert_close(effective_hessian(head, loss, z, cache=cache).blocks(), diagonal_blocks(h_ref, N, D), what="blocks")


def test_unchanged_head_reuses_its_copy_and_results_are_identical_to_uncached():
    head = make_head()
    z, loss, _ = problem()
    cache = HeadCache()
    first = effective_hessian(head, loss, z, cache=cache)
    second = effective_hessian(head, loss, z, cache=cache)
    assert second.head is first.head, "an unchanged head must reuse its analysis copy"
    assert len(cache) == 1
    uncached = effective_hessian(head, loss, z)  # no cache: a fresh copy
    assert uncached.head is not first.head
    for a, b in [(second.blocks(), uncached.blocks()), (second.dense(), uncached.dense())]:
        assert torch.equal(a, b)
    assert second.info() == uncached.info()


def test_the_copy_handed_back_is_not_copied_again():
    head = make_head()
    cache = HeadCache()
    cpu = torch.device("cpu")
    prepared = prepare_head(head, DT, cpu, cache)
    assert prepare_head(prepared.fn, DT, cpu, cache) is prepared
    assert prepare_head(head, torch.float32, cpu, cache) is not prepared  # another dtype
    assert prepare_head(prepared.fn, DT, cpu, HeadCache()) is not prepared  # another cache knows nothing of it
    assert prepare_head(head, DT, cpu) is not prepared  # no cache: always a fresh copy


def test_caches_are_independent_and_clear_forgets():
    head = make_head()
    z, loss, _ = problem()
    a, b = HeadCache(), HeadCache()
    first = effective_hessian(head, loss, z, cache=a)
    assert effective_hessian(head, loss, z, cache=b).head is not first.head
    assert effective_hessian(head, loss, z, cache=a).head is first.head
    a.clear()
    assert len(a) == 0 and effective_hessian(head, loss, z, cache=a).head is not first.head


def _data_add(head):
    head[0].weight.data.add_(0.25)  # bypasses the autograd version counter


def _no_grad_add(head):
    with torch.no_grad():
        head[2].bias.add_(0.5)


def _optimizer_step(head):
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    head(torch.randn(7, D)).pow(2).sum().backward()
    opt.step()
    head.zero_grad(set_to_none=True)


def _load_state_dict(head):
    other = make_head()
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1.5)
    head.load_state_dict(other.state_dict())


def _replace_layer(head):
    head[2] = nn.Linear(W, W)


def _change_attribute(head, cache):
    head[3] = nn.Softplus(beta=1.0)
    effective_hessian(head, problem()[1], problem()[0], cache=cache)  # cache the Softplus head, then change beta
    head[3].beta = 3.0


def _set_data(head):
    head[4].weight.data = head[4].weight.data * 2.0  # a new storage under the same Parameter


CHANGES = [_data_add, _no_grad_add, _optimizer_step, _load_state_dict, _replace_layer, _change_attribute, _set_data]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_a_changed_head_is_analysed_as_it_is_now(change):
    head = make_head()
    z, loss, plain = problem()
    cache = HeadCache()
    before = effective_hessian(head, loss, z, cache=cache).blocks()
    if change is _change_attribute:
        change(head, cache)
    else:
        change(head)
    check_blocks(head, z, loss, plain, cache)
    assert not torch.equal(effective_hessian(head, loss, z, cache=cache).blocks(), before), "the change must matter"


def test_the_sandwich_keeps_its_weight_products_only_while_the_head_is_unchanged():
    # the tail Gram W_LᵀW_L and the first Jacobian are formed once per analysis copy: a second call
    # on the unchanged head reuses them, a changed last weight gets new ones (and right blocks)
    head = make_head()
    cache = HeadCache()
    z, loss, plain = problem()
    first = effective_hessian(head, loss, z, block_strategy="sandwich", cache=cache)
    first.blocks()
    kept = first.head.facts.products
    gram = kept.tail_gram
    second = effective_hessian(head, loss, z, block_strategy="sandwich", cache=cache)
    second.blocks()
    assert second.head.facts.products is kept and kept.tail_gram is gram
    _set_data(head)
    third = effective_hessian(head, loss, z, block_strategy="sandwich", cache=cache)
    assert_close(third.blocks(), effective_hessian(copy.deepcopy(head), loss, z, block_strategy="sandwich").blocks(),
                 what="blocks after the change")
    assert third.head.facts.products is not kept
    assert not torch.allclose(third.head.facts.products.tail_gram, gram)
    check_blocks(head, z, loss, plain, cache)


def test_batchnorm_running_statistics_updated_by_a_train_forward_invalidate():
    head = make_head(bn=True)
    cache = HeadCache()
    z, loss, plain = problem()
    before = effective_hessian(head, loss, z, cache=cache).blocks()
    head.train()
    with torch.no_grad():
        head(torch.randn(16, D) * 3 + 1)  # updates running_mean / running_var in place, no _version bump
    head.eval()
    check_blocks(head, z, loss, plain, cache)
    assert not torch.equal(effective_hessian(head, loss, z, cache=cache).blocks(), before)


def test_a_mode_switch_invalidates():
    head = make_head(bn=True)
    cache = HeadCache()
    z, loss, plain = problem()
    eval_eh = effective_hessian(head, loss, z, cache=cache)
    head.train()
    train_eh = effective_hessian(head, loss, z, cache=cache)
    assert train_eh.head is not eval_eh.head and train_eh.info()["train_mode_batchnorm"]
    h_ref, _, _ = reference_parts(copy.deepcopy(head).to(DT), plain, z)
    assert_close(train_eh.blocks(), diagonal_blocks(h_ref, N, D), what="train-mode blocks")


def test_train_mode_batchnorm_head_is_reused_across_its_own_forwards():
    """Train-mode BN uses batch statistics: running-stat updates do not change the analysis."""
    head = make_head(bn=True).train()
    cache = HeadCache()
    z, loss, plain = problem()
    first = effective_hessian(head, loss, z, cache=cache)
    with torch.no_grad():
        head(torch.randn(16, D))
    second = effective_hessian(head, loss, z, cache=cache)
    assert second.head is first.head
    h_ref, _, _ = reference_parts(copy.deepcopy(head).to(DT), plain, z)
    assert_close(second.blocks(), diagonal_blocks(h_ref, N, D), what="blocks")


def test_a_head_with_uncomparable_attributes_is_copied_every_time():
    head = make_head()
    cache = HeadCache()
    head.note = object()  # nothing the cache can compare by value
    z, loss, _ = problem()
    assert effective_hessian(head, loss, z, cache=cache).head is not effective_hessian(head, loss, z, cache=cache).head
