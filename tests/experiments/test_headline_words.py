"""The headlines of the C2, C3, C6, C7 and C10 rows in words a reader understands (Row.headline_text): every
measured key their rules can decide on, reached here by driving each rule through each of its branches, has
words of its own (never the internal key itself), and the words name what was measured."""
import dataclasses
import re
from types import SimpleNamespace

import pytest

from headgeom.claims.curvature_barrier import barrier_verdict
from headgeom.claims.depth_isotropy import depth_isotropy_verdict
from headgeom.claims.fisher_rank import rank_bound_verdict
from headgeom.claims.invariance_verdict import degeneracy_verdict, lowpass_verdict
from headgeom.claims.orbit_direction import dichotomy_verdict, direction_verdict
from headgeom.experiments import c2_curvature, c3_depth, c6_invariance, c7_fisher
from headgeom.experiments.c10_pretrained import summary as c10

SNAKE = re.compile(r"\b[a-z]+_[a-z]+\b")  # an internal key's form (measured names, setting keys)
C2 = SimpleNamespace(flat_tol=1e-10, route_tol=1e-4, curved_min=1e-8, origin_tol=1e-10, growth_min=1e-3,
                     radii=(0.01, 0.1))
C6 = c6_invariance.C6Config()


def _cell(**over):
    return {"slice_found": True, "route_rel_diff": 1e-6, "cancellation": 1.0, "iso_error_max": [0.0, 0.5], **over}


def _c2_keys():
    cases = [([_cell(slice_found=False)], 0.0, 0.0), ([_cell()], None, None), ([_cell()], 1.0, 0.0),
             ([_cell()], 0.0, 1.0), ([_cell(route_rel_diff=1.0)], 0.0, 0.0), ([_cell(cancellation=0.0)], 0.0, 0.0),
             ([_cell(iso_error_max=[0.0, 0.0])], 0.0, 0.0), ([_cell()], 0.0, 0.0)]
    return {barrier_verdict(C2, rows, r, iso).headline for rows, r, iso in cases}


def _c3_keys():
    base = dict(n_fits=4, converged=1.0, frac_deep=1.0, wins=4, total=4, majority=0.8)
    cases = [dict(base, total=0), dict(base, converged=0.5), base, dict(base, frac_deep=0.0), dict(base, wins=0)]
    return {depth_isotropy_verdict(**c).headline for c in cases}


def _c6_keys():
    yes, no = [True] * 5, [False] * 5
    deg = [degeneracy_verdict(p, r, ratio_max=0.1, ratio_none=0.5, majority=0.8).headline
           for p, r in ((yes, [0.0] * 5), (yes, [1.0] * 5), (no, [0.0] * 5), (yes, [0.3] * 5))]
    low = [lowpass_verdict(h, b, n, majority=0.8).headline
           for h, b, n in ((yes, no, no), (no, yes, no), (no, no, yes), (no, no, no))]
    return set(deg) | set(low)


def _c7_keys():
    yes, no = [True] * 5, [False] * 5
    return {rank_bound_verdict(p, h, 0.8).headline for p, h in ((yes, yes), (yes, no), (no, no), (yes, yes[:2] + no[:3]))}


def test_every_key_the_theory_rules_decide_on_has_words():
    cases = [(_c2_keys(), lambda k: c2_curvature.headline_words(C2, k), 6),
             (_c3_keys(), c3_depth.HEADLINE_WORDS.get, 3), (_c6_keys(), lambda k: c6_invariance.headline_words(C6, k), 6),
             (_c7_keys(), c7_fisher.HEADLINE_WORDS.get, 2)]
    for keys, words, n in cases:
        assert len(keys) == n, keys  # every branch of the rule reached
        for key in keys:
            text = words(key)
            assert text and text != key and not SNAKE.search(text), (key, text)


def test_c2_names_the_radius_and_c6_the_premise():
    assert c2_curvature.headline_words(C2, "iso_error_at_r=0.1l").startswith(
        "isotropy error of the constant W = g(0)^-1/2 at radius 0.1·ℓ")
    assert "premise of Prop 5.2" in c6_invariance.headline_words(C6, "seeds_premise_met")
    # the suppression the words name is the config's, not a number written in them
    assert "at most 2× suppressed" in c6_invariance.headline_words(C6, "seeds_head_not_degenerate")
    quarter = dataclasses.replace(C6, ratio_none=0.25)
    assert "at most 4× suppressed" in c6_invariance.headline_words(quarter, "seeds_head_not_degenerate")
    assert "premise of Thm 5.3" in c7_fisher.HEADLINE_WORDS["seeds_premise_met"]


@pytest.mark.parametrize("verdict", [
    direction_verdict({}, "compress", complete=False),
    direction_verdict({"selectivity[dino_vit/rotation_45]": "compress"}, "compress"),
    dichotomy_verdict({"dino": "supported"}, complete=True), dichotomy_verdict({"dino": "not supported"}, True)])
def test_every_key_the_c10_rules_decide_on_has_words(verdict):
    text = c10.headline_words(verdict.headline, "DINO")
    assert text != verdict.headline and not SNAKE.search(text)
    if verdict.headline.startswith("selectivity["):
        assert text.startswith("orbit selectivity of z over the head's output, DINO ViT-S/16, rotation_45 orbits")
