"""ResNet-18 / ResNet-50 backbones with torchvision's parameter and buffer names.

Written from scratch (no torchvision dependency) so that the state_dict keys are exactly
torchvision's ``resnet18`` / ``resnet50`` minus ``fc.*``: ``conv1.weight``, ``bn1.*``,
``layer{1..4}.{b}.conv{1,2[,3]}.weight``, ``layer{s}.{b}.bn{k}.{weight,bias,running_mean,
running_var,num_batches_tracked}``, ``layer{s}.0.downsample.{0,1}.*``. Torchvision and the
official SSL releases (DINO, VICReg, Barlow Twins ResNet-50; docs/paper.md §4 pitfall 10) therefore
load with ``load_state_dict``.

Architecture follows torchvision (ResNet v1.5: the stride of a Bottleneck sits on its 3×3
conv). The CIFAR stem of docs/paper.md §3 replaces the 7×7 stride-2 conv + max-pool with a 3×3
stride-1 conv and no max-pool. The backbone has no ``fc``: ``forward`` returns the globally
average-pooled feature of shape (N, feature_dim).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet50", "scaled_width"]


def _conv3x3(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_ch: int, out_ch: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_ch, out_ch, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3×3 convs with a residual connection (ResNet-18/34). Output channels = planes."""

    expansion: int = 1

    def __init__(self, in_ch: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv3x3(in_ch, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, in_ch, H, W) -> (N, planes, H/stride, W/stride)."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn2


class Bottleneck(nn.Module):
    """1×1 reduce, 3×3 (carries the stride, v1.5), 1×1 expand ×4 (ResNet-50)."""

    expansion: int = 4

    def __init__(self, in_ch: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv1x1(in_ch, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, in_ch, H, W) -> (N, 4·planes, H/stride, W/stride)."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn3


def scaled_width(base: int, width: float) -> int:
    """Channel count ``round(base · width)``, at least 1; raises on a non-positive width."""
    if isinstance(width, bool) or not isinstance(width, (int, float)):
        raise TypeError(f"width must be a positive number, got {width!r} ({type(width).__name__}).")
    if not width > 0:
        raise ValueError(f"width must be > 0 (1.0 = the standard ResNet), got {width}.")
    return max(1, int(round(base * width)))


class ResNet(nn.Module):
    """A torchvision-named ResNet trunk without ``fc``.

    Args:
        block: ``BasicBlock`` or ``Bottleneck``.
        layers: blocks per stage, e.g. (2, 2, 2, 2) for ResNet-18, (3, 4, 6, 3) for ResNet-50.
        width: channel multiplier; stage s has ``round(64·2^s·width)`` planes.
        cifar_stem: 3×3 stride-1 conv, no max-pool (docs/paper.md §3) instead of 7×7/2 + max-pool.
        zero_init_residual: zero the last BN weight of every block (torchvision's option).
        in_chans: input channels.

    Attributes:
        feature_dim: size of the pooled output, ``planes_4 · block.expansion``.
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        width: float = 1.0,
        cifar_stem: bool = True,
        zero_init_residual: bool = False,
        in_chans: int = 3,
    ):
        super().__init__()
        if len(layers) != 4 or any(int(n) < 1 for n in layers):
            raise ValueError(f"layers must be 4 positive block counts, got {tuple(layers)}.")
        if not isinstance(in_chans, int) or in_chans < 1:
            raise ValueError(f"in_chans must be a positive int, got {in_chans!r}.")
        planes = [scaled_width(64 * 2**s, width) for s in range(4)]
        stem_ch = planes[0]
        self.width = float(width)
        self.cifar_stem = bool(cifar_stem)
        if cifar_stem:
            self.conv1 = nn.Conv2d(in_chans, stem_ch, kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_chans, stem_ch, kernel_size=7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(stem_ch)
        self.relu = nn.ReLU(inplace=True)

        self._in_ch = stem_ch
        self.layer1 = self._make_stage(block, planes[0], int(layers[0]), stride=1)
        self.layer2 = self._make_stage(block, planes[1], int(layers[1]), stride=2)
        self.layer3 = self._make_stage(block, planes[2], int(layers[2]), stride=2)
        self.layer4 = self._make_stage(block, planes[3], int(layers[3]), stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.feature_dim: int = planes[3] * block.expansion
        self._init_weights(zero_init_residual)

    def _make_stage(self, block: type[BasicBlock] | type[Bottleneck], planes: int, n: int, stride: int) -> nn.Sequential:
        out_ch = planes * block.expansion
        downsample = None
        if stride != 1 or self._in_ch != out_ch:
            downsample = nn.Sequential(_conv1x1(self._in_ch, out_ch, stride), nn.BatchNorm2d(out_ch))
        blocks = [block(self._in_ch, planes, stride, downsample)]
        self._in_ch = out_ch
        blocks += [block(out_ch, planes) for _ in range(n - 1)]
        return nn.Sequential(*blocks)

    def _init_weights(self, zero_init_residual: bool) -> None:
        # torchvision's init: Kaiming normal (fan_out, ReLU gain) for convs, BN = identity.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, (BasicBlock, Bottleneck)):
                    nn.init.zeros_(m.last_bn().weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) images -> (N, feature_dim) pooled features."""
        if x.ndim != 4 or x.shape[1] != self.conv1.in_channels:
            raise ValueError(
                f"expected images of shape (N, {self.conv1.in_channels}, H, W), got {tuple(x.shape)}."
            )
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def resnet18(
    width: float = 1.0, cifar_stem: bool = True, zero_init_residual: bool = False, in_chans: int = 3
) -> ResNet:
    """ResNet-18 trunk; default = the paper's CIFAR ResNet-18 (docs/paper.md §3), output (N, 512·width)."""
    return ResNet(BasicBlock, (2, 2, 2, 2), width, cifar_stem, zero_init_residual, in_chans)


def resnet50(
    width: float = 1.0, cifar_stem: bool = False, zero_init_residual: bool = False, in_chans: int = 3
) -> ResNet:
    """ResNet-50 trunk (ImageNet stem by default, as the DINO/VICReg/Barlow releases), output (N, 2048·width)."""
    return ResNet(Bottleneck, (3, 4, 6, 3), width, cifar_stem, zero_init_residual, in_chans)
