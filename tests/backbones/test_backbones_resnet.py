"""ResNet backbones: torchvision key names and shapes, parameter counts, a functional float64
reference forward, width multiplier, init, determinism, errors.

The expected names/shapes are generated here from torchvision's naming scheme
(conv1/bn1, layer{s}.{b}.conv{k}/bn{k}, layer{s}.0.downsample.{0,1}), not read off the model.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from headgeom.backbones import BasicBlock, Bottleneck, resnet18, resnet50

BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
R18 = dict(blocks=(2, 2, 2, 2), bottleneck=False)
R50 = dict(blocks=(3, 4, 6, 3), bottleneck=True)


def expected_shapes(blocks, bottleneck: bool, width: float = 1.0, cifar_stem: bool = True) -> dict[str, tuple]:
    """torchvision's state_dict names and shapes of ResNet without fc (ResNet v1.5)."""
    exp = 4 if bottleneck else 1
    planes = [max(1, int(round(64 * 2**s * width))) for s in range(4)]
    out: dict[str, tuple] = {}

    def conv(name, cin, cout, k):
        out[f"{name}.weight"] = (cout, cin, k, k)

    def bn(name, c):
        for key in BN_KEYS:
            out[f"{name}.{key}"] = () if key == "num_batches_tracked" else (c,)

    k_stem = 3 if cifar_stem else 7
    conv("conv1", 3, planes[0], k_stem)
    bn("bn1", planes[0])
    cin = planes[0]
    for s in range(4):
        p = planes[s]
        for b in range(blocks[s]):
            pre = f"layer{s + 1}.{b}"
            if bottleneck:
                conv(f"{pre}.conv1", cin, p, 1); bn(f"{pre}.bn1", p)
                conv(f"{pre}.conv2", p, p, 3); bn(f"{pre}.bn2", p)
                conv(f"{pre}.conv3", p, p * exp, 1); bn(f"{pre}.bn3", p * exp)
            else:
                conv(f"{pre}.conv1", cin, p, 3); bn(f"{pre}.bn1", p)
                conv(f"{pre}.conv2", p, p, 3); bn(f"{pre}.bn2", p)
            if b == 0 and (s > 0 or cin != p * exp):
                conv(f"{pre}.downsample.0", cin, p * exp, 1); bn(f"{pre}.downsample.1", p * exp)
            cin = p * exp
    return out


def n_params(shapes: dict[str, tuple]) -> int:
    """Trainable parameters = conv weights + BN weight/bias (running stats are buffers)."""
    return sum(math.prod(s) for k, s in shapes.items()
               if k.endswith(".weight") or (k.endswith(".bias")))


def model_shapes(model) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("builder,spec,cifar", [(resnet18, R18, True), (resnet18, R18, False),
                                                 (resnet50, R50, False), (resnet50, R50, True)])
def test_state_dict_names_and_shapes_are_torchvisions(builder, spec, cifar):
    model = builder(cifar_stem=cifar)
    want = expected_shapes(spec["blocks"], spec["bottleneck"], cifar_stem=cifar)
    got = model_shapes(model)
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    assert got == want
    assert list(got) == list(want)  # same order as torchvision's registration order, too
    assert not any(k.startswith("fc.") for k in got)


def test_parameter_counts():
    r18 = resnet18()
    r50 = resnet50()
    count = lambda m: sum(p.numel() for p in m.parameters())
    f18 = n_params(expected_shapes(**R18))
    f50 = n_params(expected_shapes(**R50, cifar_stem=False))
    assert count(r18) == f18 == 11_168_832  # CIFAR ResNet-18 without fc (docs/paper.md §3.1)
    # torchvision resnet50 has 25,557,032 parameters; its fc is 2048*1000 + 1000.
    assert count(r50) == f50 == 25_557_032 - (2048 * 1000 + 1000) == 23_508_032


def test_loads_a_torchvision_shaped_state_dict_strictly():
    want = expected_shapes(**R18, width=0.25)
    g = torch.Generator().manual_seed(0)
    sd = {k: (torch.tensor(7) if k.endswith("num_batches_tracked") else torch.randn(s, generator=g))
          for k, s in want.items()}
    model = resnet18(width=0.25)
    model.load_state_dict(sd, strict=True)
    for k, v in model.state_dict().items():
        assert torch.equal(v, sd[k]), k
    with pytest.raises(RuntimeError, match="fc.weight"):
        model.load_state_dict({**sd, "fc.weight": torch.zeros(10, 128)}, strict=True)


def reference_forward(sd: dict[str, torch.Tensor], blocks, bottleneck: bool, cifar_stem: bool,
                      x: torch.Tensor) -> torch.Tensor:
    """ResNet (eval mode) written with functional ops straight from a torchvision-named state dict."""

    def bn(t, name):
        m, v = sd[f"{name}.running_mean"], sd[f"{name}.running_var"]
        w, b = sd[f"{name}.weight"], sd[f"{name}.bias"]
        sh = (1, -1, 1, 1)
        return (t - m.view(sh)) / torch.sqrt(v.view(sh) + 1e-5) * w.view(sh) + b.view(sh)

    def conv(t, name, stride):
        w = sd[f"{name}.weight"]
        return F.conv2d(t, w, stride=stride, padding=w.shape[-1] // 2)

    h = torch.relu(bn(conv(x, "conv1", 1 if cifar_stem else 2), "bn1"))
    if not cifar_stem:
        h = F.max_pool2d(h, 3, 2, 1)
    for s in range(4):
        for b in range(blocks[s]):
            pre = f"layer{s + 1}.{b}"
            stride = 2 if (s > 0 and b == 0) else 1
            if bottleneck:  # v1.5: the stride sits on the 3x3 conv
                o = torch.relu(bn(conv(h, f"{pre}.conv1", 1), f"{pre}.bn1"))
                o = torch.relu(bn(conv(o, f"{pre}.conv2", stride), f"{pre}.bn2"))
                o = bn(conv(o, f"{pre}.conv3", 1), f"{pre}.bn3")
            else:
                o = torch.relu(bn(conv(h, f"{pre}.conv1", stride), f"{pre}.bn1"))
                o = bn(conv(o, f"{pre}.conv2", 1), f"{pre}.bn2")
            ds = f"{pre}.downsample"
            idn = bn(conv(h, f"{ds}.0", stride), f"{ds}.1") if f"{ds}.0.weight" in sd else h
            h = torch.relu(o + idn)
    return h.mean(dim=(2, 3))


def _randomise_bn(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
            m.running_var.copy_(0.5 + torch.rand(c, generator=g))
            m.weight.data.copy_(0.5 + torch.rand(c, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(c, generator=g))


@pytest.mark.parametrize("builder,spec,width,cifar,size", [
    (resnet18, R18, 0.25, True, 32), (resnet18, R18, 0.25, False, 64), (resnet50, R50, 0.125, False, 64),
])
def test_matches_functional_reference_in_float64(builder, spec, width, cifar, size):
    torch.manual_seed(0)
    model = builder(width=width, cifar_stem=cifar).double().eval()
    with torch.no_grad():
        _randomise_bn(model, 1)
    x = torch.randn(2, 3, size, size, dtype=torch.float64)
    with torch.no_grad():
        got = model(x)
        want = reference_forward(model.state_dict(), spec["blocks"], spec["bottleneck"], cifar, x)
    assert got.shape == (2, model.feature_dim)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_output_shapes_on_cifar_inputs():
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        r18 = resnet18().eval()
        assert r18.feature_dim == 512 and r18(x).shape == (2, 512)
        r50 = resnet50().eval()  # ImageNet stem: 32 -> 16 -> 8 -> ... -> 1, still valid
        assert r50.feature_dim == 2048 and r50(x[:1]).shape == (1, 2048)
        r50c = resnet50(width=0.25, cifar_stem=True).eval()
        assert r50c.feature_dim == 512 and r50c(x).shape == (2, 512)


def test_cifar_stem_keeps_resolution_and_imagenet_stem_divides_by_four():
    x = torch.randn(1, 3, 32, 32)
    for cifar, side in ((True, 32), (False, 8)):
        m = resnet18(width=0.125, cifar_stem=cifar).eval()
        with torch.no_grad():
            h = m.maxpool(m.relu(m.bn1(m.conv1(x))))
            assert h.shape[-2:] == (side, side)
            assert m.layer4(m.layer3(m.layer2(m.layer1(h)))).shape[-1] == side // 8


@pytest.mark.parametrize("width", [0.5, 0.3])
def test_width_multiplier_scales_channels(width):
    for builder, spec, dim in ((resnet18, R18, 512), (resnet50, R50, 2048)):
        m = builder(width=width, cifar_stem=True)
        assert model_shapes(m) == expected_shapes(**spec, width=width)
        exp = 4 if spec["bottleneck"] else 1
        assert m.feature_dim == int(round(512 * width)) * exp
        assert abs(m.feature_dim - dim * width) <= 2 * exp
        with torch.no_grad():
            assert m.eval()(torch.randn(1, 3, 32, 32)).shape == (1, m.feature_dim)
    assert resnet18(width=0.3).conv1.out_channels == 19  # round(19.2)
    assert resnet18(width=0.3).layer3[0].conv1.out_channels == 77  # round(76.8)


def test_init_kaiming_fan_out_and_identity_bn():
    torch.manual_seed(0)
    m = resnet18()
    w = m.layer4[1].conv2.weight  # 512*512*9 entries
    fan_out = w.shape[0] * w.shape[2] * w.shape[3]
    assert abs(w.mean().item()) < 1e-3
    assert w.std().item() == pytest.approx(math.sqrt(2.0 / fan_out), rel=0.01)
    w1 = m.conv1.weight
    assert w1.std().item() == pytest.approx(math.sqrt(2.0 / (64 * 9)), rel=0.1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            assert torch.all(mod.weight == 1) and torch.all(mod.bias == 0)
            assert torch.all(mod.running_mean == 0) and torch.all(mod.running_var == 1)


@pytest.mark.parametrize("builder", [resnet18, resnet50])
def test_zero_init_residual_makes_blocks_relu_of_input(builder):
    torch.manual_seed(0)
    m = builder(width=0.125, cifar_stem=True, zero_init_residual=True).eval()
    blocks = [b for b in m.modules() if isinstance(b, (BasicBlock, Bottleneck))]
    assert all(torch.all(b.last_bn().weight == 0) for b in blocks)
    blk = m.layer2[1]  # no downsample: output = relu(0 + x)
    c = blk.conv1.in_channels
    x = torch.randn(2, c, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(blk(x), torch.relu(x), rtol=0, atol=0)
        plain = builder(width=0.125, cifar_stem=True).eval()
        assert not torch.allclose(plain.layer2[1](x), torch.relu(x))


def test_deterministic_given_seed_and_in_eval():
    torch.manual_seed(3)
    a = resnet18(width=0.25)
    torch.manual_seed(3)
    b = resnet18(width=0.25)
    torch.manual_seed(4)
    c = resnet18(width=0.25)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["conv1.weight"], sc["conv1.weight"])
    a.eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(a(x), a(x))
        torch.testing.assert_close(a(x)[1:2], a(x[1:2]), rtol=1e-5, atol=1e-6)  # no cross-sample leak in eval


@pytest.mark.parametrize("width", [0, -0.5, float("nan")])
def test_bad_width_raises(width):
    with pytest.raises(ValueError, match="width"):
        resnet18(width=width)


def test_bad_width_type_and_input_shape_raise():
    with pytest.raises(TypeError, match="width"):
        resnet18(width="wide")
    m = resnet18(width=0.125).eval()
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        m(torch.randn(2, 1, 32, 32))
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        m(torch.randn(3, 32, 32))
