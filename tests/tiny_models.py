"""Tiny models shared by tests that build real SSL methods on 3-channel images."""
from torch import nn


class TinyBackbone(nn.Module):
    """(N, 3, H, W) -> (N, 8): conv, BatchNorm, ReLU, global average pool."""

    feature_dim = 8

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.net(x)
