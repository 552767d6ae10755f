"""Small float64 heads and losses shared by the geometry tests: ``make_head(activation, depth, bn)``
(an MLP with optional BatchNorm in eval or train mode) and ``make_loss(name)`` (an objective
against a fixed random other view)."""
from __future__ import annotations

import torch
from torch import nn

from headgeom.objectives import barlow_twins, info_nce, mse_to_target, negative_cosine, nt_xent, vicreg

DT = torch.float64
N, D, WIDTH, K = 4, 3, 5, 4

ACTIVATIONS = {
    "linear": None,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "softplus": lambda: nn.Softplus(beta=2.0),
    "tanh": nn.Tanh,
}


def make_head(activation: str, depth: int, bn: str, d: int = D, width: int = WIDTH, k: int = K, seed: int = 0) -> nn.Module:
    """An MLP with `depth` Linear layers; BN (none / eval / train) and the activation between them."""
    torch.manual_seed(seed)
    dims = [d] + [width] * (depth - 1) + [k]
    layers: list[nn.Module] = []
    for i in range(depth):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < depth - 1:
            if bn != "none":
                layers.append(nn.BatchNorm1d(dims[i + 1]))
            if ACTIVATIONS[activation] is not None:
                layers.append(ACTIVATIONS[activation]())
    head = nn.Sequential(*layers).to(DT)
    for m in head.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    head.train(bn == "train")
    return head


def make_loss(name: str, k: int = K, n: int = N, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    other = torch.randn(n, k, generator=g, dtype=DT)
    return {
        "mse": lambda u: mse_to_target(u, other),
        "negative_cosine": lambda u: negative_cosine(u, other),
        "nt_xent": lambda u: nt_xent(u, other),
        "info_nce": lambda u: info_nce(u, other),
        "vicreg": lambda u: vicreg(u, other),
        "barlow_twins": lambda u: barlow_twins(u, other),
    }[name]
