"""HeadSpec validation, the compact string form and its exact round trip."""
import dataclasses

import pytest

from headgeom.heads import HeadSpec, parse_head

SPECS = [
    HeadSpec((512, 2048, 2048)),
    HeadSpec((512, 2048, 2048), activation="silu", norm="bn", last_norm="bn", bias=False),
    HeadSpec((512, 2048, 2048), activation="linear", bias=False),
    HeadSpec((16, 4)),
    HeadSpec((8, 32, 32, 32, 3), activation="tanh", norm="ln", last_norm="ln"),
    HeadSpec((8, 4, 8), activation="softplus", activation_kwargs={"beta": 5}),
    HeadSpec((8, 4, 8), activation="softplus", activation_kwargs={"beta": 0.25, "threshold": 10}),
    HeadSpec((8, 4, 8), activation="softplus", activation_kwargs={"threshold": 7.5}),
    HeadSpec((8, 4, 8), activation="softplus", activation_kwargs={"beta": 1e-7}),
    HeadSpec((8, 4, 8), activation="elu", activation_kwargs={"alpha": -0.3}),
    HeadSpec((8, 4, 8), activation="gelu", activation_kwargs={"approximate": "tanh"}),
    HeadSpec((2048, 512, 2048), norm="bn", bias=False, last_bias=True),
    HeadSpec((2048, 4096, 256), norm="bn", last_bias=False),
    HeadSpec((2048, 2048, 2048, 2048), norm="bn", last_norm="bn_noaffine", bias=False),
    HeadSpec((384, 2048, 2048, 65536), activation="gelu", bottleneck=256),
    HeadSpec((384, 2048, 65536), activation="gelu", norm="bn", bottleneck=256, norm_last_layer=False),
    HeadSpec((384, 65536), activation="gelu", bottleneck=256, bias=False, last_norm="ln"),
    HeadSpec((10, 20, 30), activation="relu", bottleneck=5, last_bias=False),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.to_string())
def test_spec_string_round_trip(spec):
    s = spec.to_string()
    back = parse_head(s)
    assert back == spec
    assert hash(back) == hash(spec)
    assert back.to_string() == s


CANONICAL = [
    "512-2048-2048:relu",
    "512-2048-2048:silu:bn:last=bn:nobias",
    "512-2048-2048:linear:nobias",
    "8-4-8:softplus=5",
    "8-4-8:softplus=0.25",
    "8-4-8:softplus(beta=2,threshold=10)",
    "8-4-8:elu=0.5",
    "8-4-8:gelu=tanh",
    "2048-512-2048:relu:bn:nobias:lastbias",
    "2048-2048-2048-2048:relu:bn:last=bn_noaffine:nobias",
    "384-2048-2048-65536:gelu:dino=256",
    "384-2048-65536:gelu:ln:dino=256:nonormlast",
]


@pytest.mark.parametrize("s", CANONICAL)
def test_canonical_strings_are_fixed_points(s):
    assert parse_head(s).to_string() == s


@pytest.mark.parametrize(
    "s, expected",
    [
        ("512-2048", HeadSpec((512, 2048))),  # relu by default
        ("512-2048:swish", HeadSpec((512, 2048), activation="silu")),
        ("512-2048:SiLU:BN", HeadSpec((512, 2048), activation="silu", norm="bn")),
        ("512-2048:identity", HeadSpec((512, 2048), activation="linear")),
        (" 6-5 : bn : tanh ", HeadSpec((6, 5), activation="tanh", norm="bn")),
        ("6-5:softplus=5.0", HeadSpec((6, 5), activation="softplus", activation_kwargs=(("beta", 5.0),))),
        ("6-5:softplus(threshold=3,beta=2)",
         HeadSpec((6, 5), activation="softplus", activation_kwargs=(("beta", 2.0), ("threshold", 3.0)))),
        ("6-5:softplus(beta=2)", HeadSpec((6, 5), activation="softplus", activation_kwargs={"beta": 2.0})),
        ("6-7-5:nolastbias:nobias", HeadSpec((6, 7, 5), bias=False, last_bias=False)),
        ("6-7-5:dino=3:gelu", HeadSpec((6, 7, 5), activation="gelu", bottleneck=3)),
    ],
)
def test_parse_non_canonical_strings(s, expected):
    spec = parse_head(s)
    assert spec == expected


def test_parse_reads_every_field():
    spec = parse_head("384-2048-65536:softplus(beta=3,threshold=15):ln:last=bn:nobias:dino=256:nonormlast")
    assert spec.widths == (384, 2048, 65536)
    assert spec.activation == "softplus"
    assert spec.act_kwargs == {"beta": 3.0, "threshold": 15.0}
    assert (spec.norm, spec.last_norm, spec.bias, spec.last_bias) == ("ln", "bn", False, None)
    assert (spec.bottleneck, spec.norm_last_layer) == (256, False)
    assert spec.in_dim == 384 and spec.out_dim == 65536


def test_constructor_coerces_lists_dicts_and_aliases():
    a = HeadSpec([4, 5, 6], activation="softplus", activation_kwargs={"threshold": 9, "beta": 5})
    b = HeadSpec((4, 5, 6), activation="softplus", activation_kwargs=(("beta", 5.0), ("threshold", 9.0)))
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a.widths == (4, 5, 6) and isinstance(a.widths, tuple)
    assert HeadSpec((4, 5), activation="swish").activation == "silu"
    assert HeadSpec((4, 5), activation="SWISH") == HeadSpec((4, 5), activation="silu")


def test_spec_is_frozen_and_replace_validates():
    spec = HeadSpec((4, 5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.norm = "bn"
    with pytest.raises(ValueError, match="norm"):
        dataclasses.replace(spec, norm="batchnorm")


def test_effective_last_bias():
    assert HeadSpec((4, 5)).effective_last_bias is True
    assert HeadSpec((4, 5), bias=False).effective_last_bias is False
    assert HeadSpec((4, 5), bias=False, last_bias=True).effective_last_bias is True
    assert HeadSpec((4, 5, 6), bottleneck=3).effective_last_bias is False


@pytest.mark.parametrize(
    "s, token, fragment",
    [
        ("512", "512", "at least two positive widths"),
        ("512-0", "512-0", "at least two positive widths"),
        ("512-x-3", "512-x-3", "ints joined by '-'"),
        ("512--3", "512--3", "ints joined by '-'"),
        ("512-10:foo", "foo", "not a known option"),
        ("512-10:relu:gelu", "gelu", "second time"),
        ("512-10:bn:ln", "ln", "second time"),
        ("512-10:last=ln2", "last=ln2", "last=bn, last=bn_noaffine or last=ln"),
        ("512-10:last=none", "last=none", "last=bn"),
        ("512-10:softplus=abc", "softplus=abc", "not a number"),
        ("512-10:softplus=nan", "softplus=nan", "not finite"),
        ("512-10:softplus=", "softplus=", "no value"),
        ("512-10:relu=3", "relu=3", "relu has no parameter"),
        ("512-10:softplus(gamma=1)", "softplus(gamma=1)", "does not take"),
        ("512-10:softplus(beta=1", "softplus(beta=1", "without closing"),
        ("512-10:softplus(beta)", "softplus(beta)", "KEY=VALUE"),
        ("512-10:softplus(beta=1,beta=2)", "softplus(beta=1,beta=2)", "repeats"),
        ("512-10::relu", "", "empty"),
        ("512-10:relu:", "", "empty"),
        ("512-10:dino=0", "dino=0", "positive bottleneck"),
        ("512-10:dino=x", "dino=x", "positive bottleneck"),
        ("512-10:nobias:nobias", "nobias", "second time"),
        ("512-10:lastbias:nolastbias", "nolastbias", "second time"),
    ],
)
def test_bad_strings_quote_string_and_token(s, token, fragment):
    with pytest.raises(ValueError) as err:
        parse_head(s)
    msg = str(err.value)
    assert repr(s) in msg
    assert repr(token) in msg
    assert fragment in msg
    assert "Example" in msg


@pytest.mark.parametrize(
    "s, fragment",
    [
        ("512-10:nonormlast", "only applies to DINO"),
        ("512-10:dino=4:lastbias", "last_bias=True is impossible"),
        ("512-10:gelu=erf", "none, tanh"),
        ("512-10:softplus=-2", "must be > 0"),
    ],
)
def test_well_formed_but_invalid_strings(s, fragment):
    with pytest.raises(ValueError) as err:
        parse_head(s)
    assert repr(s) in str(err.value) and fragment in str(err.value)


def test_parse_rejects_non_string():
    with pytest.raises(TypeError, match="expects a str"):
        parse_head(512)


@pytest.mark.parametrize(
    "kwargs, exc, fragment",
    [
        (dict(widths=(512,)), ValueError, "at least 2 entries"),
        (dict(widths=()), ValueError, "at least 2 entries"),
        (dict(widths="512-10"), TypeError, "sequence of ints"),
        (dict(widths=5), TypeError, "sequence of ints"),
        (dict(widths=(512, 0)), ValueError, "positive ints"),
        (dict(widths=(512, 10.0)), ValueError, "positive ints"),
        (dict(widths=(512, True)), ValueError, "positive ints"),
        (dict(widths=(4, 5), activation="sigmoid"), ValueError, "unknown activation 'sigmoid'"),
        (dict(widths=(4, 5), activation="linear", activation_kwargs={"beta": 2}), ValueError, "no keyword"),
        (dict(widths=(4, 5), activation_kwargs=[("beta",)]), TypeError, "pairs"),
        (dict(widths=(4, 5), activation_kwargs=5), TypeError, "dict or"),
        (dict(widths=(4, 5), activation="softplus", activation_kwargs=[("beta", 1), ("beta", 2)]),
         ValueError, "repeats"),
        (dict(widths=(4, 5), norm="bn_noaffine"), ValueError, "none, bn, ln"),
        (dict(widths=(4, 5), last_norm="batchnorm"), ValueError, "none, bn, bn_noaffine, ln"),
        (dict(widths=(4, 5), bias=1), TypeError, "bias must be a bool"),
        (dict(widths=(4, 5), last_bias="no"), TypeError, "last_bias must be a bool or None"),
        (dict(widths=(4, 5), bottleneck=0), ValueError, "bottleneck must be a positive int"),
        (dict(widths=(4, 5), bottleneck=2.0), ValueError, "bottleneck must be a positive int"),
        (dict(widths=(4, 5), bottleneck=2, last_bias=True), ValueError, "impossible"),
        (dict(widths=(4, 5), norm_last_layer=False), ValueError, "only applies to DINO"),
        (dict(widths=(4, 5), bottleneck=2, norm_last_layer=0), TypeError, "norm_last_layer must be a bool"),
    ],
)
def test_bad_specs_raise_with_useful_messages(kwargs, exc, fragment):
    with pytest.raises(exc) as err:
        HeadSpec(**kwargs)
    assert fragment in str(err.value)


def _count(widths, bias, last_bias, norm_affine, last_affine, bottleneck=None):
    """Parameter count from first principles: Linear w·(in) (+out bias), affine norm 2·w."""
    total = 0
    n_lin = len(widths) - 1
    for i in range(n_lin):
        fan_in = widths[i]
        fan_out = widths[i + 1] if (bottleneck is None or i < n_lin - 1) else bottleneck
        is_last_plain = i == n_lin - 1 and bottleneck is None
        has_bias = last_bias if is_last_plain else bias
        total += fan_in * fan_out + (fan_out if has_bias else 0)
        if i < n_lin - 1 and norm_affine:
            total += 2 * fan_out
    if bottleneck is not None:
        total += bottleneck * widths[-1] + widths[-1]  # weight_v (out, b) and weight_g (out, 1)
    if last_affine:
        total += 2 * widths[-1]
    return total


@pytest.mark.parametrize(
    "spec, expected",
    [
        (HeadSpec((5, 7)), _count((5, 7), True, True, False, False)),
        (HeadSpec((5, 7, 3), norm="bn", last_norm="bn_noaffine", bias=False),
         _count((5, 7, 3), False, False, True, False)),
        (HeadSpec((5, 7, 9, 3), norm="ln", last_norm="ln", last_bias=False),
         _count((5, 7, 9, 3), True, False, True, True)),
        (HeadSpec((5, 7, 11), activation="gelu", bottleneck=4), _count((5, 7, 11), True, False, False, False, 4)),
        (HeadSpec((5, 11), bottleneck=4, bias=False), _count((5, 11), False, False, False, False, 4)),
    ],
)
def test_num_parameters_matches_first_principles(spec, expected):
    assert spec.num_parameters() == expected
