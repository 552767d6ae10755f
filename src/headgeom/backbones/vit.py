"""Pre-norm Vision Transformer with the key names of facebookresearch/dino ``vision_transformer.py``.

State-dict keys: ``cls_token``, ``pos_embed``, ``patch_embed.proj.{weight,bias}``,
``blocks.{i}.norm1.*``, ``blocks.{i}.attn.qkv.*``, ``blocks.{i}.attn.proj.*``,
``blocks.{i}.norm2.*``, ``blocks.{i}.mlp.fc1.*``, ``blocks.{i}.mlp.fc2.*`` and ``norm.*`` (only
when ``final_norm``), so DINO's ViT-S/16 backbone loads with ``load_state_dict``.
``forward`` returns the CLS token of the last layer (after the final LayerNorm if any).

Presets: ``vit_tiny`` is the paper's CIFAR ViT-Tiny (docs/paper.md §3: patch 4 on 32×32, width 192,
3 heads, MLP 768, 3 layers, no final LayerNorm); ``vit_small`` is DINO's ViT-S/16.
Attention runs through ``F.scaled_dot_product_attention`` (scale head_dim^-1/2, as DINO).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["VisionTransformer", "interpolate_pos_embed", "vit_tiny", "vit_small"]


class PatchEmbed(nn.Module):
    """Non-overlapping patches by a stride-``patch_size`` conv: (N, C, H, W) -> (N, H·W/p², D)."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head self-attention with a fused ``qkv`` linear and an output ``proj``."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, T, D) -> (N, T, D)."""
        n, t, d = x.shape
        # qkv output is laid out as (3, heads, head_dim) along the last axis, as DINO/timm.
        q, k, v = self.qkv(x).reshape(n, t, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class Mlp(nn.Module):
    """fc1 -> act -> fc2."""

    def __init__(self, dim: int, hidden: int, act_layer: type[nn.Module] = nn.GELU):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm encoder layer: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float,
        qkv_bias: bool,
        norm_eps: float,
        act_layer: type[nn.Module],
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = Attention(dim, num_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def interpolate_pos_embed(pos_embed: torch.Tensor, grid: tuple[int, int], native: tuple[int, int]) -> torch.Tensor:
    """Resize the patch part of a (1, 1 + gh·gw, D) position embedding to ``grid`` = (rows, cols).

    Returns ``pos_embed`` itself when ``grid == native``. Otherwise bicubic interpolation
    (align_corners=False) with DINO's scale factor (rows + 0.1) / gh per axis, so that features
    at other resolutions match the official ``interpolate_pos_encoding``; the CLS entry is kept.
    """
    gh, gw = native
    if pos_embed.ndim != 3 or pos_embed.shape[0] != 1 or pos_embed.shape[1] != 1 + gh * gw:
        raise ValueError(
            f"pos_embed must have shape (1, 1 + {gh}*{gw}, D) for a {gh}x{gw} grid, got {tuple(pos_embed.shape)}."
        )
    rows, cols = grid
    if (rows, cols) == (gh, gw):
        return pos_embed
    dim = pos_embed.shape[-1]
    patch = pos_embed[:, 1:].reshape(1, gh, gw, dim).permute(0, 3, 1, 2)
    patch = F.interpolate(patch, scale_factor=((rows + 0.1) / gh, (cols + 0.1) / gw), mode="bicubic",
                          align_corners=False)
    if patch.shape[-2:] != (rows, cols):  # guards the +0.1 trick, as DINO's assert
        raise RuntimeError(f"interpolated grid {tuple(patch.shape[-2:])} != requested {(rows, cols)}.")
    patch = patch.permute(0, 2, 3, 1).reshape(1, rows * cols, dim)
    return torch.cat((pos_embed[:, :1], patch), dim=1)


class VisionTransformer(nn.Module):
    """Pre-norm ViT returning the CLS token, (N, C, H, W) -> (N, embed_dim).

    Inputs whose size differs from ``img_size`` use an interpolated position embedding
    (``interpolate_pos_embed``); H and W must be multiples of ``patch_size``.
    Init as DINO: trunc-normal(0.02) for cls/pos/Linear weights, zero Linear biases,
    LayerNorm = (1, 0), PyTorch's default for the patch conv.
    """

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 384,
        depth: int = 12,
        num_heads: int = 6,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        final_norm: bool = True,
        norm_eps: float = 1e-6,
        act_layer: type[nn.Module] = nn.GELU,
    ):
        super().__init__()
        for name, val, low in (("img_size", img_size, 1), ("patch_size", patch_size, 1), ("in_chans", in_chans, 1),
                               ("embed_dim", embed_dim, 1), ("depth", depth, 0), ("num_heads", num_heads, 1)):
            if isinstance(val, bool) or not isinstance(val, int) or val < low:
                raise ValueError(f"{name} must be an int >= {low}, got {val!r}.")
        if img_size % patch_size:
            raise ValueError(f"img_size ({img_size}) must be a multiple of patch_size ({patch_size}).")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads}).")
        if not mlp_ratio > 0:
            raise ValueError(f"mlp_ratio must be > 0, got {mlp_ratio}.")
        self.img_size, self.patch_size = img_size, patch_size
        self.grid = (img_size // patch_size, img_size // patch_size)
        self.embed_dim = self.feature_dim = embed_dim

        self.patch_embed = PatchEmbed(patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid[0] * self.grid[1], embed_dim))
        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias, norm_eps, act_layer) for _ in range(depth)
        )
        self.norm: nn.Module = nn.LayerNorm(embed_dim, eps=norm_eps) if final_norm else nn.Identity()
        self._init_weights()

    def _init_weights(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def prepare_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) -> (N, 1 + H·W/p², D): CLS + patch tokens plus position embedding."""
        p = self.patch_size
        if x.ndim != 4 or x.shape[1] != self.patch_embed.proj.in_channels:
            raise ValueError(
                f"expected images of shape (N, {self.patch_embed.proj.in_channels}, H, W), got {tuple(x.shape)}."
            )
        h, w = x.shape[-2:]
        if h % p or w % p:
            raise ValueError(f"image size {h}x{w} is not a multiple of patch_size {p}; resize or crop the input.")
        tokens = self.patch_embed(x)
        tokens = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), tokens), dim=1)
        return tokens + interpolate_pos_embed(self.pos_embed, (h // p, w // p), self.grid)

    def forward_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """All output tokens after the last block (and final norm if any): (N, 1 + P, D)."""
        t = self.prepare_tokens(x)
        for blk in self.blocks:
            t = blk(t)
        return self.norm(t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) -> (N, embed_dim), the CLS token output."""
        return self.forward_tokens(x)[:, 0]


def vit_tiny(
    img_size: int = 32,
    patch_size: int = 4,
    in_chans: int = 3,
    embed_dim: int = 192,
    depth: int = 3,
    num_heads: int = 3,
    mlp_ratio: float = 4.0,
    final_norm: bool = False,
    norm_eps: float = 1e-6,
) -> VisionTransformer:
    """The paper's CIFAR "ViT-Tiny" (docs/paper.md §3): 64 patches + CLS, 192 wide, 3 heads, MLP 768,
    3 pre-norm layers, no final LayerNorm; output (N, 192). The paper does not state the
    LayerNorm eps; DINO's 1e-6 is used."""
    return VisionTransformer(img_size, patch_size, in_chans, embed_dim, depth, num_heads, mlp_ratio,
                             qkv_bias=True, final_norm=final_norm, norm_eps=norm_eps)


def vit_small(
    img_size: int = 224,
    patch_size: int = 16,
    in_chans: int = 3,
    depth: int = 12,
    final_norm: bool = True,
) -> VisionTransformer:
    """DINO's ViT-S/16: 224 px, 384 wide, 12 layers, 6 heads, MLP ratio 4, qkv bias, final
    LayerNorm (eps 1e-6); output (N, 384). ``depth`` may be reduced for tests."""
    return VisionTransformer(img_size, patch_size, in_chans, 384, depth, 6, 4.0, qkv_bias=True,
                             final_norm=final_norm, norm_eps=1e-6)
