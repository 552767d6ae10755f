"""Tiny models and runs shared by tests that build or train real SSL methods on 3-channel images."""
from torch import nn

from headgeom.train import TrainConfig


def train_config(**kw) -> TrainConfig:
    """The loop tests' run: method and backbone "tiny", 64 ``shapes`` images at 16 px, batch 16 (4 steps
    per epoch), 3 epochs on CPU; ``kw`` overrides any field."""
    base = dict(method="tiny", backbone="tiny", data="shapes", data_options={"n": 64, "size": 16},
                epochs=3, batch_size=16, lr=0.05, warmup_epochs=1.0, weight_decay=1e-3, progress=False,
                device="cpu", seed=3)
    base.update(kw)
    return TrainConfig(**base)


class TinyBackbone(nn.Module):
    """(N, 3, H, W) -> (N, 8): conv, BatchNorm, ReLU, global average pool."""

    feature_dim = 8

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.net(x)
