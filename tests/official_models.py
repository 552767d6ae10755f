"""Small re-writings of the official SSL code (DINOHead and MultiCropWrapper of facebookresearch/dino,
VICReg's Projector, BarlowTwins, SimSiam's builder), so their state_dict keys are the official ones
by construction; ``DDP`` adds the ``module.`` prefix as DistributedDataParallel does. Shared by the
checkpoint loader tests, C10, ``headgeom analyze`` on official-layout files and
benchmarks/bench_analyze.py. The ``*_checkpoint`` functions return the dict each release's
training script saves (its container keys, ``module.`` where DDP wrapped the model), ready for
``torch.save``."""
from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm as parametrized_weight_norm


class DDP(nn.Module):
    """Stands for DistributedDataParallel: the wrapped model lives at ``.module``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module


class DINOHead(nn.Module):
    """facebookresearch/dino vision_transformer.py DINOHead, as that code writes it (its weight init,
    an ``nn.utils.weight_norm`` last layer); ``new_weight_norm``: the same layer through the current
    torch API (``torch.nn.utils.parametrizations.weight_norm``); ``plain_last``: the released
    ResNet-50 head's plain last layer."""

    def __init__(self, in_dim, out_dim, use_bn=False, norm_last_layer=True, nlayers=3, hidden_dim=2048,
                 bottleneck_dim=256, plain_last=False, new_weight_norm=False):
        super().__init__()
        nlayers = max(nlayers, 1)
        if nlayers == 1:
            self.mlp = nn.Linear(in_dim, bottleneck_dim)
        else:
            layers = [nn.Linear(in_dim, hidden_dim)]
            if use_bn:
                layers.append(nn.BatchNorm1d(hidden_dim))
            layers.append(nn.GELU())
            for _ in range(nlayers - 2):
                layers.append(nn.Linear(hidden_dim, hidden_dim))
                if use_bn:
                    layers.append(nn.BatchNorm1d(hidden_dim))
                layers.append(nn.GELU())
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
            self.mlp = nn.Sequential(*layers)
        self.apply(self._init_weights)
        if plain_last:  # the released ResNet-50 head (https://github.com/facebookresearch/dino/issues/189)
            self.last_layer = nn.Linear(bottleneck_dim, out_dim, bias=False)
            return
        if new_weight_norm:
            self.last_layer = parametrized_weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
            g = self.last_layer.parametrizations.weight.original0
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # deprecated; the DINO code uses it
                self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
            g = self.last_layer.weight_g
        g.data.fill_(1)
        if norm_last_layer:
            g.requires_grad = False

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.mlp(x)
        x = F.normalize(x, dim=-1, p=2)
        return self.last_layer(x)


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head


def vicreg_projector(embedding: int, mlp: str) -> nn.Sequential:
    """facebookresearch/vicreg main_vicreg.py Projector."""
    f = list(map(int, f"{embedding}-{mlp}".split("-")))
    layers = []
    for i in range(len(f) - 2):
        layers += [nn.Linear(f[i], f[i + 1]), nn.BatchNorm1d(f[i + 1]), nn.ReLU(True)]
    layers.append(nn.Linear(f[-2], f[-1], bias=False))
    return nn.Sequential(*layers)


class VICReg(nn.Module):
    def __init__(self, backbone, embedding, mlp):
        super().__init__()
        self.backbone, self.projector = backbone, vicreg_projector(embedding, mlp)


class BarlowTwins(nn.Module):
    """facebookresearch/barlowtwins main.py BarlowTwins (the backbone's fc already removed)."""

    def __init__(self, backbone, embedding, projector):
        super().__init__()
        self.backbone = backbone
        sizes = [embedding] + list(map(int, projector.split("-")))
        layers = []
        for i in range(len(sizes) - 2):
            layers += [nn.Linear(sizes[i], sizes[i + 1], bias=False), nn.BatchNorm1d(sizes[i + 1]), nn.ReLU(True)]
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)


class SimSiam(nn.Module):
    """facebookresearch/simsiam simsiam/builder.py SimSiam; ``encoder`` gets torchvision's ``fc``."""

    def __init__(self, encoder, dim, pred_dim):
        super().__init__()
        self.encoder = encoder
        prev_dim = encoder.feature_dim
        encoder.fc = nn.Linear(prev_dim, dim)  # torchvision's resnet(num_classes=dim)
        encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False), nn.BatchNorm1d(prev_dim),
                                   nn.ReLU(inplace=True), nn.Linear(prev_dim, prev_dim, bias=False),
                                   nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True), encoder.fc,
                                   nn.BatchNorm1d(dim, affine=False))
        encoder.fc[6].bias.requires_grad = False
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False), nn.BatchNorm1d(pred_dim),
                                       nn.ReLU(inplace=True), nn.Linear(pred_dim, dim))


@torch.no_grad()
def randomise_(model: nn.Module, seed: int) -> nn.Module:
    """Random weights and BN statistics everywhere, so eval outputs depend on every tensor."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            m.num_batches_tracked.fill_(17)
            if m.affine:
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
    return model.eval()


def _optimizer_state(n_params: int) -> dict:
    """An optimizer state_dict's layout (no state), as the official scripts save beside the model."""
    return {"state": {}, "param_groups": [{"lr": 0.0, "weight_decay": 1e-6, "params": list(range(n_params))}]}


def dino_full_checkpoint(make_backbone: Callable[[], nn.Module], seeds: tuple[int, int] = (1, 2),
                         **head_kw) -> tuple[dict, MultiCropWrapper]:
    """facebookresearch/dino main_dino.py's ``*_full_checkpoint.pth``: the student under DDP
    (``module.`` keys), the teacher bare (as the ViT release has it), both MultiCropWrapper(backbone,
    DINOHead(**head_kw)) with random weights; returns (the dict, the teacher in eval mode)."""
    nets = [randomise_(MultiCropWrapper(make_backbone(), DINOHead(**head_kw)), seed=s) for s in seeds]
    return {"student": DDP(nets[0]).state_dict(), "teacher": nets[1].state_dict(), "epoch": 100,
            "optimizer": _optimizer_state(1)}, nets[1]


def method_full_checkpoint(model: nn.Module, epoch: int = 1000) -> dict:
    """VICReg's and Barlow Twins' ``resnet50_fullckpt.pth``: {"epoch", "model" (DDP keys), "optimizer"}."""
    return {"epoch": epoch, "model": DDP(model).state_dict(), "optimizer": _optimizer_state(2)}


def simsiam_checkpoint(model: SimSiam, epoch: int = 100) -> dict:
    """facebookresearch/simsiam main_simsiam.py's ``checkpoint_%04d.pth.tar``:
    {"epoch", "arch", "state_dict" (DDP keys), "optimizer"}."""
    return {"epoch": epoch, "arch": "resnet50", "state_dict": DDP(model).state_dict(),
            "optimizer": _optimizer_state(len(list(model.parameters())))}
