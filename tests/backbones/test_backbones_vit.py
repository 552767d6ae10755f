"""ViT backbones: DINO key names and shapes, parameter counts by formula, an explicit float64
reference forward (manual softmax attention, manual patchify), the CLS output, position-embedding
interpolation against an independent numpy bicubic, init, determinism, errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.backbones import VisionTransformer, interpolate_pos_embed, vit_small, vit_tiny


def dino_shapes(img: int, patch: int, dim: int, depth: int, mlp: int, final_norm: bool, chans: int = 3) -> dict:
    """facebookresearch/dino VisionTransformer state_dict names and shapes (num_classes=0)."""
    out = {"cls_token": (1, 1, dim), "pos_embed": (1, 1 + (img // patch) ** 2, dim),
           "patch_embed.proj.weight": (dim, chans, patch, patch), "patch_embed.proj.bias": (dim,)}
    for i in range(depth):
        b = f"blocks.{i}"
        out.update({
            f"{b}.norm1.weight": (dim,), f"{b}.norm1.bias": (dim,),
            f"{b}.attn.qkv.weight": (3 * dim, dim), f"{b}.attn.qkv.bias": (3 * dim,),
            f"{b}.attn.proj.weight": (dim, dim), f"{b}.attn.proj.bias": (dim,),
            f"{b}.norm2.weight": (dim,), f"{b}.norm2.bias": (dim,),
            f"{b}.mlp.fc1.weight": (mlp, dim), f"{b}.mlp.fc1.bias": (mlp,),
            f"{b}.mlp.fc2.weight": (dim, mlp), f"{b}.mlp.fc2.bias": (dim,),
        })
    if final_norm:
        out.update({"norm.weight": (dim,), "norm.bias": (dim,)})
    return out


def vit_param_formula(img: int, patch: int, dim: int, depth: int, mlp: int, final_norm: bool) -> int:
    tokens = (img // patch) ** 2 + 1
    embed = 3 * patch * patch * dim + dim + dim + tokens * dim  # conv, its bias, cls, pos
    block = 2 * dim + (dim * 3 * dim + 3 * dim) + (dim * dim + dim) + 2 * dim + (dim * mlp + mlp) + (mlp * dim + dim)
    return embed + depth * block + (2 * dim if final_norm else 0)


def shapes(m) -> dict:
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def test_vit_small_has_dino_keys_shapes_and_parameter_count():
    m = vit_small()
    want = dino_shapes(224, 16, 384, 12, 1536, True)
    got = shapes(m)
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    assert got == want
    n = sum(p.numel() for p in m.parameters())
    assert n == vit_param_formula(224, 16, 384, 12, 1536, True) == 21_665_664
    assert m.feature_dim == 384 and m.blocks[0].norm1.eps == 1e-6 and m.norm.eps == 1e-6
    assert m.blocks[0].attn.num_heads == 6


def test_vit_small_loads_a_dino_shaped_state_dict_and_runs():
    want = dino_shapes(224, 16, 384, 2, 1536, True)
    g = torch.Generator().manual_seed(0)
    sd = {k: 0.02 * torch.randn(s, generator=g) for k, s in want.items()}
    m = vit_small(depth=2)
    m.load_state_dict(sd, strict=True)
    with torch.no_grad():
        assert m.eval()(torch.randn(1, 3, 224, 224)).shape == (1, 384)


def test_vit_tiny_is_the_papers_model():
    m = vit_tiny()
    want = dino_shapes(32, 4, 192, 3, 768, final_norm=False)
    assert shapes(m) == want  # 3 blocks, 192 wide, MLP 768, 64 patches + CLS, no norm.*
    assert len(m.blocks) == 3 and m.feature_dim == 192
    assert isinstance(m.norm, torch.nn.Identity)
    assert all(b.attn.num_heads == 3 for b in m.blocks)
    assert sum(p.numel() for p in m.parameters()) == vit_param_formula(32, 4, 192, 3, 768, False)
    with torch.no_grad():
        assert m.eval()(torch.randn(2, 3, 32, 32)).shape == (2, 192)


def reference_vit(sd: dict, x: torch.Tensor, patch: int, heads: int, depth: int, final_norm: bool,
                  eps: float) -> torch.Tensor:
    """Explicit pre-norm ViT: unfold patches by reshape, softmax attention by hand, CLS of the output."""
    n, c, h, w = x.shape
    gh, gw = h // patch, w // patch
    # (N, C, gh, p, gw, p) -> (N, gh*gw, C*p*p), channel-major inside a patch as Conv2d weights are.
    patches = x.reshape(n, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(n, gh * gw, c * patch * patch)
    wpe = sd["patch_embed.proj.weight"].reshape(sd["patch_embed.proj.weight"].shape[0], -1)
    t = patches @ wpe.T + sd["patch_embed.proj.bias"]
    t = torch.cat([sd["cls_token"].expand(n, 1, -1), t], dim=1) + sd["pos_embed"]
    d = t.shape[-1]
    hd = d // heads

    def ln(z, pre):
        mu = z.mean(-1, keepdim=True)
        var = ((z - mu) ** 2).mean(-1, keepdim=True)
        return (z - mu) / torch.sqrt(var + eps) * sd[f"{pre}.weight"] + sd[f"{pre}.bias"]

    def lin(z, pre):
        return z @ sd[f"{pre}.weight"].T + sd[f"{pre}.bias"]

    for i in range(depth):
        b = f"blocks.{i}"
        qkv = lin(ln(t, f"{b}.norm1"), f"{b}.attn.qkv")
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        out = torch.zeros_like(t)
        for hh in range(heads):
            sl = slice(hh * hd, (hh + 1) * hd)
            a = torch.softmax(q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(hd), dim=-1)
            out[..., sl] = a @ v[..., sl]
        t = t + lin(out, f"{b}.attn.proj")
        z = lin(ln(t, f"{b}.norm2"), f"{b}.mlp.fc1")
        z = 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))  # exact GELU
        t = t + lin(z, f"{b}.mlp.fc2")
    if final_norm:
        t = ln(t, "norm")
    return t[:, 0]


def _randomise(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p + 0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("cfg", [
    dict(img_size=32, patch_size=4, embed_dim=192, depth=3, num_heads=3, final_norm=False),  # the paper's
    dict(img_size=16, patch_size=4, embed_dim=24, depth=2, num_heads=4, final_norm=True, mlp_ratio=2.0),
])
def test_matches_explicit_reference_in_float64(cfg):
    torch.manual_seed(0)
    m = VisionTransformer(**cfg).double().eval()
    _randomise(m, 1)  # non-trivial biases and LayerNorm affines
    x = torch.randn(2, 3, cfg["img_size"], cfg["img_size"], dtype=torch.float64)
    with torch.no_grad():
        got = m(x)
        want = reference_vit(m.state_dict(), x, cfg["patch_size"], cfg["num_heads"], cfg["depth"],
                             cfg["final_norm"], 1e-6)
    assert got.shape == (2, cfg["embed_dim"])
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_output_is_the_cls_token():
    torch.manual_seed(0)
    m = vit_tiny().eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        y = m(x)
        x2 = x.clone()
        x2[0, :, 8:12, 20:24] += 1.0  # one 4x4 patch of sample 0
        y2 = m(x2)
        tok = m.forward_tokens(x)
    assert (y2[0] - y[0]).abs().max() > 1e-4  # attention carries the patch into CLS
    torch.testing.assert_close(y2[1], y[1], rtol=0, atol=0)  # samples stay independent
    torch.testing.assert_close(y, tok[:, 0], rtol=0, atol=0)
    assert not torch.allclose(y, tok[:, 1:].mean(1), atol=1e-3)  # not mean pooling

    # Depth 0 without final norm: the output is exactly cls_token + pos_embed[0], whatever the image.
    m0 = vit_tiny(depth=0).eval()
    with torch.no_grad():
        want = (m0.cls_token[0, 0] + m0.pos_embed[0, 0]).expand(2, -1)
        torch.testing.assert_close(m0(x), want, rtol=0, atol=0)
        torch.testing.assert_close(m0(torch.randn(2, 3, 48, 40)), want, rtol=0, atol=0)


def keys_cubic_matrix(n_in: int, n_out: int, scale_factor: float, a: float = -0.75) -> np.ndarray:
    """(n_out, n_in) bicubic resampling matrix, align_corners=False, border-clamped taps,
    source coordinate (i + 0.5) / scale_factor - 0.5 (the mapping DINO's scale_factor call uses)."""
    def w(s):
        s = abs(s)
        if s <= 1:
            return (a + 2) * s**3 - (a + 3) * s**2 + 1
        if s < 2:
            return a * s**3 - 5 * a * s**2 + 8 * a * s - 4 * a
        return 0.0

    mat = np.zeros((n_out, n_in))
    for i in range(n_out):
        src = (i + 0.5) / scale_factor - 0.5
        f = math.floor(src)
        for j in range(f - 1, f + 3):
            mat[i, min(max(j, 0), n_in - 1)] += w(src - j)
    return mat


@pytest.mark.parametrize("grid", [(12, 12), (8, 12), (5, 3)])
def test_pos_embed_interpolation_matches_numpy_bicubic(grid):
    gh, gw, d = 8, 8, 5
    g = torch.Generator().manual_seed(0)
    pe = torch.randn(1, 1 + gh * gw, d, generator=g, dtype=torch.float64)
    out = interpolate_pos_embed(pe, grid, (gh, gw))
    rows, cols = grid
    assert out.shape == (1, 1 + rows * cols, d)
    torch.testing.assert_close(out[:, 0], pe[:, 0], rtol=0, atol=0)  # CLS entry untouched
    mh = keys_cubic_matrix(gh, rows, (rows + 0.1) / gh)
    mw = keys_cubic_matrix(gw, cols, (cols + 0.1) / gw)
    x = pe[0, 1:].numpy().reshape(gh, gw, d)
    want = np.einsum("ri,ijd,cj->rcd", mh, x, mw).reshape(rows * cols, d)
    np.testing.assert_allclose(out[0, 1:].numpy(), want, rtol=1e-10, atol=1e-12)
    # A constant field stays constant (the cubic weights sum to one).
    const = torch.full_like(pe, 0.7)
    torch.testing.assert_close(interpolate_pos_embed(const, grid, (gh, gw)),
                               torch.full((1, 1 + rows * cols, d), 0.7, dtype=torch.float64))


def test_pos_embed_identity_at_native_size_and_model_runs_elsewhere():
    m = vit_tiny().eval()
    assert interpolate_pos_embed(m.pos_embed, (8, 8), (8, 8)) is m.pos_embed
    x = torch.randn(2, 3, 48, 32)
    with torch.no_grad():
        tokens = m.prepare_tokens(x)
        assert tokens.shape == (2, 1 + 12 * 8, 192)
        pe = interpolate_pos_embed(m.pos_embed, (12, 8), (8, 8))
        patch = m.patch_embed(x)
        torch.testing.assert_close(tokens[:, 1:], patch + pe[:, 1:], rtol=0, atol=0)
        assert m(x).shape == (2, 192)
        # at the native size the raw pos_embed is added
        t32 = m.prepare_tokens(x[..., :32, :])
        torch.testing.assert_close(t32[:, 1:], m.patch_embed(x[..., :32, :]) + m.pos_embed[:, 1:], rtol=0, atol=0)


def test_init_follows_dino():
    torch.manual_seed(0)
    m = vit_small(depth=2)
    w = m.blocks[0].mlp.fc1.weight  # 590k entries
    assert w.std().item() == pytest.approx(0.02, rel=0.01) and abs(w.mean().item()) < 2e-4
    assert m.pos_embed.std().item() == pytest.approx(0.02, rel=0.02)
    assert m.cls_token.abs().max().item() < 0.1 and m.cls_token.std().item() == pytest.approx(0.02, rel=0.2)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Linear):
            assert torch.all(mod.bias == 0)
        if isinstance(mod, torch.nn.LayerNorm):
            assert torch.all(mod.weight == 1) and torch.all(mod.bias == 0)
    conv = m.patch_embed.proj.weight  # PyTorch default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    fan_in = conv[0].numel()
    bound = 1 / math.sqrt(fan_in)
    assert conv.abs().max().item() <= bound
    assert conv.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)


def test_deterministic_given_seed_and_in_eval():
    torch.manual_seed(5)
    a = vit_tiny()
    torch.manual_seed(5)
    b = vit_tiny()
    torch.manual_seed(6)
    c = vit_tiny()
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["pos_embed"], sc["pos_embed"])
    a.eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(a(x), a(x))


def test_errors_speak():
    m = vit_tiny()
    with pytest.raises(ValueError, match="multiple of patch_size 4"):
        m(torch.randn(1, 3, 30, 32))
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        m(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match="divisible by num_heads"):
        VisionTransformer(img_size=32, patch_size=4, embed_dim=190, num_heads=3)
    with pytest.raises(ValueError, match="multiple of patch_size"):
        VisionTransformer(img_size=30, patch_size=4, embed_dim=12, num_heads=3)
    with pytest.raises(ValueError, match="depth"):
        vit_tiny(depth=-1)
    with pytest.raises(ValueError, match=r"shape \(1, 1 \+ 8\*8, D\)"):
        interpolate_pos_embed(torch.zeros(1, 50, 4), (4, 4), (8, 8))
