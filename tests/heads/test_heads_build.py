"""ProjectionHead: flat layer contract, forward against a hand-written reference, BN, DINO, scaling."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.heads import HeadSpec, L2Normalize, ProjectionHead, head_from, parse_head, scale_linear_weights_


def _n_params(module, trainable_only=False):
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def _reference_forward(head: ProjectionHead, z: torch.Tensor) -> torch.Tensor:
    """The head re-computed from its parameters with functional ops, from the spec's layout."""
    spec, mods = head.spec, list(head.layers)
    x, i = z, 0
    n_lin = len(spec.widths) - 1
    for l in range(n_lin):
        lin = mods[i]
        i += 1
        x = F.linear(x, lin.weight, lin.bias)
        if l < n_lin - 1:
            if spec.norm == "ln":
                x = F.layer_norm(x, (x.shape[-1],), mods[i].weight, mods[i].bias, eps=1e-5)
                i += 1
            elif spec.norm == "bn":  # train mode: batch statistics, biased variance
                bn = mods[i]
                x = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5) * bn.weight + bn.bias
                i += 1
            kw = spec.act_kwargs
            if spec.activation == "softplus":
                beta = kw.get("beta", 1.0)
                x = torch.log1p(torch.exp(beta * x)) / beta
            elif spec.activation == "tanh":
                x = torch.tanh(x)
            elif spec.activation == "silu":
                x = x * torch.sigmoid(x)
            elif spec.activation == "gelu":
                x = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
            elif spec.activation == "relu":
                x = x.clamp_min(0)
            if spec.activation != "linear":
                i += 1
    if spec.bottleneck is not None:
        x = x / x.norm(dim=-1, keepdim=True)
        v = mods[i + 1].parametrizations.weight.original1
        g = mods[i + 1].parametrizations.weight.original0
        x = x @ (g * v / v.norm(dim=1, keepdim=True)).T
        i += 2
    if spec.last_norm in ("bn", "bn_noaffine"):
        x = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-5)
        if spec.last_norm == "bn":
            x = x * mods[i].weight + mods[i].bias
        i += 1
    elif spec.last_norm == "ln":
        x = F.layer_norm(x, (x.shape[-1],), mods[i].weight, mods[i].bias, eps=1e-5)
        i += 1
    assert i == len(mods), "reference consumed a different number of layers"
    return x


FORWARD_STRINGS = [
    "6-5",
    "6-9-5:linear:nobias",
    "6-9-5:softplus=5:ln:last=bn_noaffine",
    "6-9-8-5:tanh:bn:last=bn:nolastbias",
    "6-9-5:silu:bn:last=ln:nobias:lastbias",
    "6-9-9-11:gelu:dino=4",
    "6-11:gelu:nobias:dino=3:last=bn",
]


@pytest.mark.parametrize("s", FORWARD_STRINGS)
def test_forward_shape_and_value_match_reference(s):
    torch.manual_seed(0)
    head = head_from(s, dtype=torch.float64)
    with torch.no_grad():  # non-trivial BN/LN affine parameters
        for m in head.layers:
            if isinstance(m, (nn.BatchNorm1d, nn.LayerNorm)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    z = torch.randn(7, 6, dtype=torch.float64)
    u = head(z)
    assert u.shape == (7, head.spec.out_dim)
    torch.testing.assert_close(u, head.layers(z), rtol=0, atol=0)
    torch.testing.assert_close(u, _reference_forward(head, z), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("s", FORWARD_STRINGS)
def test_only_submodule_is_a_flat_sequential_of_leaves(s):
    head = head_from(s)
    assert [name for name, _ in head.named_children()] == ["layers"]
    assert isinstance(head.layers, nn.Sequential)
    for m in head.layers:
        children = [name for name, _ in m.named_children()]
        assert children in ([], ["parametrizations"])  # weight_norm's ModuleDict only
        assert isinstance(m, (nn.Linear, nn.BatchNorm1d, nn.LayerNorm, L2Normalize, nn.Tanh, nn.GELU,
                              nn.SiLU, nn.Softplus, nn.ReLU, nn.ELU))
    assert head.spec == parse_head(s)


def test_linear_head_has_nothing_between_linears():
    assert [type(m) for m in head_from("6-9-5:linear").layers] == [nn.Linear, nn.Linear]
    assert [type(m) for m in head_from("6-9-9-5:identity:bn:last=bn").layers] == [
        nn.Linear, nn.BatchNorm1d, nn.Linear, nn.BatchNorm1d, nn.Linear, nn.BatchNorm1d]


def test_wrong_input_dim_raises():
    head = head_from("6-5")
    with pytest.raises(ValueError, match=r"expects inputs with last dim 6, got shape \(3, 4\)"):
        head(torch.randn(3, 4))


def test_projection_head_rejects_strings():
    with pytest.raises(TypeError, match="head_from"):
        ProjectionHead("6-5")


def _formula(widths, bias, last_bias, hidden_norm_params, last_norm_params):
    """Parameters of an MLP with plain Linears: Σ in·out (+ out) plus norm affine params."""
    n = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    n += sum(widths[1:-1]) if bias else 0
    n += widths[-1] if last_bias else 0
    n += hidden_norm_params * sum(widths[1:-1]) + last_norm_params * widths[-1]
    return n


@pytest.mark.parametrize(
    "s, expected",
    [
        ("6-5", 6 * 5 + 5),
        ("6-9-5:linear:nobias", 6 * 9 + 9 * 5),
        ("6-9-5:softplus=5:ln:last=bn_noaffine", _formula((6, 9, 5), True, True, 2, 0)),
        ("6-9-8-5:tanh:bn:last=bn:nolastbias", _formula((6, 9, 8, 5), True, False, 2, 2)),
        ("6-9-5:silu:bn:last=ln:nobias:lastbias", _formula((6, 9, 5), False, True, 2, 2)),
        # DINO: 6→9→9→bottleneck 4 (with bias), then v (11, 4) and g (11, 1)
        ("6-9-9-11:gelu:dino=4", 6 * 9 + 9 + 9 * 9 + 9 + 9 * 4 + 4 + 11 * 4 + 11),
        ("6-11:gelu:nobias:dino=3:last=bn", 6 * 3 + 11 * 3 + 11 + 2 * 11),
    ],
)
def test_parameter_counts(s, expected):
    head = head_from(s)
    assert _n_params(head) == expected
    assert head.spec.num_parameters() == expected


def test_dino_last_layer_is_weight_normalised_and_g_frozen():
    torch.manual_seed(0)
    head = head_from("6-9-9-11:gelu:dino=4", dtype=torch.float64)
    last = head.layers[-1]
    g = last.parametrizations.weight.original0
    assert g.shape == (11, 1) and not g.requires_grad
    torch.testing.assert_close(last.weight.norm(dim=1), torch.ones(11, dtype=torch.float64))
    assert _n_params(head, trainable_only=True) == _n_params(head) - 11
    assert isinstance(head.layers[-2], L2Normalize)
    # a few SGD steps keep ‖row‖ = 1 and g fixed, while v and the output change
    opt = torch.optim.SGD([p for p in head.parameters() if p.requires_grad], lr=0.5)
    u0 = head(torch.ones(1, 6, dtype=torch.float64)).detach()
    for _ in range(3):
        opt.zero_grad()
        head(torch.randn(8, 6, dtype=torch.float64)).pow(3).sum().backward()
        opt.step()
    assert torch.equal(g, torch.ones(11, 1, dtype=torch.float64))
    torch.testing.assert_close(last.weight.norm(dim=1), torch.ones(11, dtype=torch.float64))
    assert not torch.allclose(head(torch.ones(1, 6, dtype=torch.float64)), u0)


def test_dino_without_norm_last_layer_trains_g():
    torch.manual_seed(0)
    head = head_from("6-9-11:gelu:dino=4:nonormlast")
    g = head.layers[-1].parametrizations.weight.original0
    assert g.requires_grad and torch.equal(g, torch.ones(11, 1))  # filled with 1 as DINOHead
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    head(torch.randn(8, 6)).pow(3).sum().backward()
    opt.step()
    assert not torch.allclose(g, torch.ones(11, 1))
    assert _n_params(head, trainable_only=True) == _n_params(head)


def test_dino_head_initialisation_follows_dinohead():
    """DINOHead._init_weights: MLP Linears trunc_normal(std=.02), zero bias; the weight-normed last
    layer keeps nn.Linear's default, uniform(±1/sqrt(fan_in)); other heads keep torch defaults."""
    torch.manual_seed(0)
    head = head_from("64-256-256-512:gelu:bn:dino=64")
    mlp = [m for m in head.layers if isinstance(m, torch.nn.Linear)][:-1]
    assert [tuple(m.weight.shape) for m in mlp] == [(256, 64), (256, 256), (64, 256)]
    for m in mlp:
        assert 0.019 < float(m.weight.std()) < 0.021 and float(m.weight.abs().max()) <= 2.0
        assert torch.equal(m.bias, torch.zeros_like(m.bias))
    v = head.layers[-1].parametrizations.weight.original1
    bound = 1 / math.sqrt(64)
    assert float(v.abs().max()) <= bound and abs(float(v.std()) - bound / math.sqrt(3)) < 0.05 * bound
    plain = head_from("64-256-512:gelu")
    assert float(plain.layers[0].bias.abs().max()) > 0  # torch's default, not DINO's


def test_batchnorm_train_vs_eval():
    torch.manual_seed(0)
    head = head_from("6-5:linear:last=bn_noaffine", dtype=torch.float64)
    lin, bn = head.layers
    z = torch.randn(16, 6, dtype=torch.float64) * 3 + 1
    a = z @ lin.weight.T + lin.bias
    head.train()
    u = head(z)
    torch.testing.assert_close(u, (a - a.mean(0)) / torch.sqrt(a.var(0, unbiased=False) + 1e-5))
    # running statistics: momentum 0.1 from (0, 1), unbiased variance
    torch.testing.assert_close(bn.running_mean, 0.1 * a.mean(0))
    torch.testing.assert_close(bn.running_var, 0.9 + 0.1 * a.var(0, unbiased=True))
    head.eval()
    u_eval = head(z)
    torch.testing.assert_close(u_eval, (a - bn.running_mean) / torch.sqrt(bn.running_var + 1e-5))
    # eval mode is row-wise: one sample alone gives its row of the batch output
    torch.testing.assert_close(head(z[3:4]), u_eval[3:4])
    head.train()
    assert not torch.allclose(head(z[:8])[3], head(z)[3])  # train mode couples samples


@pytest.mark.parametrize("s", ["6-9-5:silu:bn:last=bn:nobias", "6-9-9-11:gelu:dino=4", "6-9-5:tanh:ln"])
def test_scale_linear_weights_scales_exactly(s):
    torch.manual_seed(0)
    head = head_from(s)
    before = {id(m): m.weight.detach().clone() for m in head.layers if isinstance(m, nn.Linear)}
    others = {n: p.detach().clone() for n, p in head.named_parameters() if not n.endswith("weight")
              and "parametrizations" not in n}
    assert scale_linear_weights_(head, 0.1) is head
    for m in head.layers:
        if isinstance(m, nn.Linear):
            torch.testing.assert_close(m.weight, 0.1 * before[id(m)], rtol=1e-6, atol=0)
    for n, p in head.named_parameters():
        if n in others:
            assert torch.equal(p, others[n]), n  # biases untouched


def test_scale_linear_weights_on_bias_free_linear_head_scales_output_by_alpha_squared():
    torch.manual_seed(0)
    head = head_from("6-9-5:linear:nobias", dtype=torch.float64)
    z = torch.randn(4, 6, dtype=torch.float64)
    u = head(z).detach()
    scale_linear_weights_(head, 0.1)
    torch.testing.assert_close(head(z), 0.01 * u, rtol=1e-12, atol=0)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), "0.1", True])
def test_scale_linear_weights_rejects_bad_alpha(alpha):
    with pytest.raises(ValueError, match="finite number"):
        scale_linear_weights_(head_from("6-5"), alpha)


def test_head_from_spec_string_and_preset_with_overrides():
    spec = HeadSpec((6, 9, 5), activation="silu")
    assert head_from(spec).spec == spec
    assert head_from(spec, norm="bn").spec == HeadSpec((6, 9, 5), activation="silu", norm="bn")
    assert head_from("6-9-5:silu", last_norm="ln").spec.last_norm == "ln"
    # preset arguments go to the preset, the others replace fields
    h = head_from("paper_projector", in_dim=8, activation="gelu", bn=True, last_norm="bn_noaffine")
    assert h.spec == HeadSpec((8, 2048, 2048), activation="gelu", norm="bn", last_norm="bn_noaffine", bias=False)
    h = head_from("dino", in_dim=6, out_dim=11, hidden_dim=9, bottleneck_dim=4, device="meta")
    assert h.spec == HeadSpec((6, 9, 9, 11), activation="gelu", bottleneck=4)
    assert head_from("6-5", dtype=torch.float64).layers[0].weight.dtype == torch.float64


@pytest.mark.parametrize(
    "args, kwargs, exc, fragment",
    [
        (("paper_projector",), {"width": 5}, TypeError, "unknown override"),
        (("6-5",), {"width": 5}, TypeError, "unknown HeadSpec field"),
        (("6-5",), {"norm": "batch"}, ValueError, "none, bn, ln"),
        (("simclr_v2",), {}, ValueError, "neither a head preset"),
        (("6-5:foo",), {}, ValueError, "'foo'"),
        ((3,), {}, TypeError, "expects a HeadSpec"),
    ],
)
def test_head_from_errors(args, kwargs, exc, fragment):
    with pytest.raises(exc, match=fragment):
        head_from(*args, **kwargs)


@pytest.mark.parametrize("s", ["6-9-5:softplus=5", "6-9-9-11:gelu:dino=4", "6-9-5:tanh:ln:nobias"])
def test_torch_func_jacobian_through_head_matches_autograd(s):
    # the geometry engine differentiates heads with torch.func (vmap over samples)
    torch.manual_seed(0)
    head = head_from(s, dtype=torch.float64)
    z = torch.randn(3, 6, dtype=torch.float64)
    jac = torch.func.vmap(torch.func.jacrev(head))(z)
    for i in range(3):
        ref = torch.autograd.functional.jacobian(head, z[i : i + 1])[0, :, 0, :]
        torch.testing.assert_close(jac[i], ref, rtol=1e-10, atol=1e-12)
