"""The SSL methods with any projector / predictor (docs/paper.md §1, §3).

Names: simclr (symmetric NT-Xent), simclr_oneway (the paper's one-directional InfoNCE),
simsiam, byol (EMA target), vicreg, barlow_twins, dino (EMA teacher, centring, teacher
temperature warm-up, multi-crop), mocov3 (symmetric InfoNCE against a momentum key encoder).
The interface is docs/design.md#method-interface:

>>> import torch
>>> from headgeom.methods import build_method
>>> m = build_method("simclr", backbone="resnet18", backbone_options={"width": 0.125}, head="d-32-16")
>>> out = m([torch.rand(4, 3, 16, 16), torch.rand(4, 3, 16, 16)])
>>> sorted(out), out["z"][0].shape
(['logs', 'loss', 'z'], torch.Size([4, 64]))
"""
from headgeom.heads.resolution import resolve_head
from headgeom.methods.base import SSLMethod, no_decay, preserve_buffers
from headgeom.methods.contrastive import SimCLR, SimCLROneWay
from headgeom.methods.dino import DINO
from headgeom.methods.dino_center import DINOCenter, center_update, teacher_temperature
from headgeom.methods.ema import EMATarget, cosine_momentum, ema_update_
from headgeom.methods.mocov3 import MoCoV3
from headgeom.methods.redundancy import BarlowTwins, VICReg
from headgeom.methods.registry import METHODS, build_method, build_method_from_spec, get_method_class
from headgeom.methods.siamese import BYOL, SimSiam, byol_regression
from headgeom.methods.spec import MethodSpec

__all__ = [
    "SSLMethod", "MethodSpec", "METHODS", "build_method", "build_method_from_spec", "get_method_class",
    "SimCLR", "SimCLROneWay", "SimSiam", "BYOL", "VICReg", "BarlowTwins", "DINO", "MoCoV3",
    "EMATarget", "cosine_momentum", "ema_update_", "DINOCenter", "center_update", "teacher_temperature",
    "resolve_head", "no_decay", "preserve_buffers", "byol_regression",
]
