"""Block queries of a subset of samples (``rows=``), the path a query takes (``block_path``), and
queries that leave the engine's state unchanged; against the dense float64 reference
(tests/geometry_reference.py)."""
from __future__ import annotations

import pytest
import torch

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.analysis_facts import LAZY_FACTS
from headgeom.geometry.engine.effective_hessian import LAZY_RESULTS
from headgeom.objectives import analysis_loss

from geometry_reference import assert_close, diagonal_blocks, reference_parts
from geometry_problems import DT, N, D, K, make_head, make_loss

# (head, loss, engine options, the path blocks() takes): one case per strategy
CASES = {
    "sandwich-discovered": (("silu", 2, "none"), "mse", {}, "sandwich+discovered-curvature"),
    "sandwich-hvp": (("tanh", 3, "eval"), "negative_cosine", {"block_strategy": "sandwich", "discover_structure": False},
                     "sandwich+hvp"),
    "jacobian-discovered": (("gelu", 2, "none"), "mse", {"block_strategy": "jacobian"}, "jacobian+discovered-curvature"),
    "jacobian-hvp": (("silu", 2, "none"), "negative_cosine",
                     {"block_strategy": "jacobian", "discover_structure": False}, "jacobian"),
    "rows-hvp": (("softplus", 2, "none"), "vicreg", {}, "rows+hvp"),
    "rows-declared": (("silu", 2, "none"), "nt_xent-declared", {}, "rows+declared-coupled-blocks"),
    "coupled-head": (("silu", 2, "train"), "barlow_twins", {}, "coupled-matvecs"),
}
ROWS = [(2, [0, 1]), (slice(1, 4), [1, 2, 3]), (torch.tensor([3, 0]), [3, 0]), ([-1], [3])]


def _problem(case: str):
    (act, depth, bn), loss_name, options, path = CASES[case]
    head = make_head(act, depth, bn)
    z = torch.randn(N, D, dtype=DT, generator=torch.Generator().manual_seed(5))
    if loss_name == "nt_xent-declared":
        other = torch.randn(N, K, dtype=DT, generator=torch.Generator().manual_seed(6))
        loss = analysis_loss("nt_xent", other)
    else:
        loss = make_loss(loss_name)
    return head, loss, z, options, path


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_give_the_reference_blocks_of_those_samples(case):
    head, loss, z, options, path = _problem(case)
    ref = [diagonal_blocks(x, N, D) for x in reference_parts(head, loss, z)]
    eh = effective_hessian(head, loss, z, **options)
    assert eh.block_path() == path
    for rows, idx in ROWS:
        what = f"{case} rows={rows!r}"
        h, g, m = eh.decomposed_blocks(rows=rows)
        assert h.shape == (len(idx), D, D)
        for got, want, part in zip((h, g, m), ref, "HGM"):
            assert_close(got, want[idx], what=f"{what} {part}")
        assert_close(eh.blocks(rows=rows), ref[0][idx], what=f"{what} blocks")
        assert_close(eh.gauss_newton_blocks(rows=rows), ref[1][idx], what=f"{what} G blocks")
        assert_close(eh.interaction_blocks(rows=rows), ref[2][idx], what=f"{what} M blocks")
    # rows=None and all rows in order give the same blocks as the full query
    assert_close(eh.blocks(rows=N), eh.blocks(), rtol=1e-12, atol=1e-14, what=f"{case} rows=N")


@pytest.mark.parametrize("case", ["sandwich-discovered", "rows-declared", "coupled-head"])
def test_queries_mutate_nothing_but_the_lazy_facts(case):
    head, loss, z, options, path = _problem(case)
    eh = effective_hessian(head, loss, z, **options)
    eh.block_path("H")  # measures the loss curvature the dispatch reads

    def state() -> dict:
        own = {k: v for k, v in vars(eh).items() if k not in LAZY_RESULTS}
        facts = {f"facts.{k}": v for k, v in vars(eh.facts).items() if k not in LAZY_FACTS}
        return {**own, **facts, **{f"settings.{k}": v for k, v in vars(eh.facts.settings).items()}}

    before = state()
    snapshot = {k: v.clone() for k, v in before.items() if isinstance(v, torch.Tensor)}
    for query in (eh.blocks, eh.gauss_newton_blocks, eh.interaction_blocks, eh.decomposed_blocks,
                  lambda: eh.blocks(rows=2), lambda: eh.block_path("M"), eh.info, eh.operand_scale):
        query()
        after = state()
        assert after.keys() == before.keys(), f"{case}: a query added or removed {set(after) ^ set(before)}"
        changed = [k for k in before if after[k] is not before[k]]
        assert not changed, f"{case}: a query reassigned {changed}"
        assert all(torch.equal(after[k], t) for k, t in snapshot.items()), f"{case}: a query changed a tensor"
    assert set(vars(eh.facts)) <= {k[len("facts."):] for k in before if k.startswith("facts.")} | set(LAZY_FACTS)
    assert eh.info()["blocks_path"] == path == eh.block_path()


def test_the_facts_are_frozen():
    head, loss, z, options, _ = _problem("sandwich-discovered")
    eh = effective_hessian(head, loss, z, **options)
    for obj, name in ((eh, "facts"), (eh.facts, "u"), (eh.facts, "separable_loss"), (eh.facts.settings, "reading")):
        with pytest.raises(AttributeError):
            setattr(obj, name, None)


def test_rows_and_parts_are_checked():
    head, loss, z, options, _ = _problem("sandwich-discovered")
    eh = effective_hessian(head, loss, z, **options)
    for bad, match in ((0, "1 <= b"), (N + 1, "1 <= b"), (True, "rows must be"), ([0, 0], "repeated"),
                       ([N], "outside"), (torch.tensor([True, False, True, False]), "integer sample indices"),
                       (slice(2, 2), "no sample")):
        with pytest.raises(ValueError, match=match):
            eh.blocks(rows=bad)
    with pytest.raises(ValueError, match="part must be one of"):
        eh.block_path("X")
