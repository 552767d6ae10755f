"""Property-based fuzzing of the head-spec grammar (headgeom.heads.spec.parse_head) with hypothesis.

The property, for any text a user may pass as ``--head``: a HeadSpec whose canonical string parses
back to it, or a ValueError whose message is one line naming the text; never another exception.
Texts are drawn both at random and from the grammar (widths, activations with and without values,
norms, options, repeated and misspelt tokens), so most examples reach the deep branches. The example
budgets are small and the examples the same every run (CI time, and a suite that cannot flake);
``HEADGEOM_FUZZ_SCALE=N`` runs N times as many fresh random ones. ``deadline=None`` so that a loaded
machine cannot fail a slow example, and ``database=None`` so that nothing is written into the checkout.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headgeom.heads.spec import HeadSpec, parse_head

# CI runs a fixed, small set of examples (derandomized: the same every run, so the suite cannot flake);
# HEADGEOM_FUZZ_SCALE=N runs N times as many, freshly random, for a longer search
SCALE = int(os.environ.get("HEADGEOM_FUZZ_SCALE", "1"))
SETTINGS = settings(max_examples=150 * SCALE, derandomize=SCALE == 1, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

ACTS = ["relu", "gelu", "silu", "swish", "softplus", "tanh", "elu", "linear", "identity", "ReLU", "sigmoid", "gelu_"]
NUMBERS = st.one_of(st.integers(-3, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["", "tanh", "none", "1e400", "-0", "0x10", "nan", "inf", "5,", "="]))
KEYS = st.sampled_from(["beta", "threshold", "alpha", "approximate", "inplace", "", "x"])


def _act_token() -> st.SearchStrategy[str]:
    plain = st.sampled_from(ACTS)
    valued = st.builds(lambda a, v: f"{a}={v}", plain, NUMBERS)
    called = st.builds(lambda a, kv: f"{a}(" + ",".join(f"{k}={v}" for k, v in kv) + ")",
                       plain, st.lists(st.tuples(KEYS, NUMBERS), max_size=3))
    return st.one_of(plain, valued, called)


TOKENS = st.one_of(
    _act_token(),
    st.sampled_from(["bn", "ln", "BN", "last=bn", "last=bn_noaffine", "last=ln", "last=none", "last=", "nobias",
                     "lastbias", "nolastbias", "nonormlast", "dino=256", "dino=0", "dino=-1", "dino=x", ""]),
    st.builds(lambda n: f"dino={n}", st.integers(-2, 10**9)),
    st.text(max_size=8),
)
WIDTHS = st.one_of(
    st.lists(st.integers(-2, 4096), min_size=0, max_size=5).map(lambda ws: "-".join(map(str, ws))),
    st.text(alphabet="0123456789- +_x.", max_size=12),
)
GRAMMAR = st.builds(lambda w, ts: ":".join([w, *ts]), WIDTHS, st.lists(TOKENS, max_size=5))


def _check(text: str) -> None:
    try:
        spec = parse_head(text)
    except ValueError as err:
        message = str(err)
        assert message and "\n" not in message and "\r" not in message, message
        assert "head" in message.lower(), message  # it says what was wrong: the head text
        return
    assert isinstance(spec, HeadSpec)
    assert parse_head(spec.to_string()) == spec  # the canonical form reads back as the same head


@SETTINGS
@given(GRAMMAR)
def test_a_grammar_shaped_head_text_parses_or_fails_in_one_line(text):
    _check(text)


@SETTINGS
@given(st.text(max_size=40))
def test_any_head_text_parses_or_fails_in_one_line(text):
    _check(text)
