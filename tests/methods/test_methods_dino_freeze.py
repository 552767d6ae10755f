"""DINO's freeze_last_layer (official main_dino.py ``--freeze_last_layer``, default 1 epoch):
the projector's output layer gets no gradient, hence no update, during the first N epochs.

Unit: ``before_optimizer_step`` drops exactly the output layer's gradients while
``epoch < freeze_last_layer``. Loop: a 2-epoch run (4 steps per epoch) keeps the output layer at
its initial value through epoch 1 and moves it in epoch 2, while the rest of the head moves from
the start; with ``freeze_last_layer=0`` (control) it moves in epoch 1.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from headgeom.methods import build_method
from headgeom.train import load_checkpoint, train
from tiny_models import train_config as cfg

HEAD = "d-16-16:gelu:dino=8"


class TinyBackbone(nn.Module):
    feature_dim = 8

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.net(x)


def build(config):
    return build_method("dino", backbone=TinyBackbone(), head=HEAD, **config.method_options)


def last_layer_names(method) -> list[str]:
    ids = {id(p) for p in method.last_layer().parameters()}
    return [k for k, p in method.named_parameters() if id(p) in ids]


def test_official_default_is_one_epoch():
    m = build(cfg(method="dino"))
    assert m.options["freeze_last_layer"] == 1
    last = m.last_layer()
    assert isinstance(last, nn.Linear) and tuple(last.weight.shape) == (16, 8)  # bottleneck 8 -> K 16
    with pytest.raises(ValueError, match="freeze_last_layer"):
        build(cfg(method="dino", method_options={"freeze_last_layer": -1}))


@pytest.mark.parametrize("freeze, epoch, dropped", [(1, 0, True), (1, 1, False), (0, 0, False), (3, 2, True)])
def test_before_optimizer_step_drops_only_the_last_layer_gradients(freeze, epoch, dropped):
    torch.manual_seed(0)
    m = build(cfg(method="dino", method_options={"freeze_last_layer": freeze}))
    views = [torch.rand(4, 3, 8, 8) for _ in range(3)]
    m(views)["loss"].backward()
    m.before_optimizer_step(step=5, epoch=epoch)
    last = set(last_layer_names(m))
    assert last
    for name, p in m.named_parameters():
        if not p.requires_grad:
            continue  # weight_g of a normalised last layer is frozen anyway
        if name in last:
            assert (p.grad is None) == dropped, name
        else:
            assert p.grad is not None, name


def _run(tmp_path, freeze: int):
    config = cfg(method="dino", backbone="tiny", head=HEAD, epochs=2, keep_every_epochs=1, warmup_epochs=0.0,
                 method_options={"freeze_last_layer": freeze, "n_local_crops": 2})
    out = tmp_path / f"freeze{freeze}"
    train(config, out, build_method=build)
    torch.manual_seed(config.seed)  # train() seeds the initialisation the same way
    init_method = build(config)
    names = last_layer_names(init_method)
    init = init_method.state_dict()
    e1 = load_checkpoint(out / "checkpoints" / "epoch_0001.pt")
    e2 = load_checkpoint(out / "checkpoints" / "epoch_0002.pt")
    assert (e1["step"], e2["step"]) == (4, 8)
    return names, init, e1["method"], e2["method"]


def test_training_keeps_the_last_layer_fixed_during_the_frozen_epoch(tmp_path):
    names, init, e1, e2 = _run(tmp_path, freeze=1)
    trainable = [k for k in names if k.endswith("original1")]  # weight_v; weight_g is frozen at 1
    assert trainable
    for k in trainable:
        assert torch.equal(e1[k], init[k]), k  # frozen through epoch 1
        assert not torch.allclose(e2[k], e1[k]), k  # trained in epoch 2
    other = [k for k in init if k.startswith("projector.") and k.endswith("weight") and k not in names]
    assert other and all(not torch.allclose(e1[k], init[k]) for k in other)  # the rest of the head trains


def test_without_freezing_the_last_layer_moves_in_the_first_epoch(tmp_path):
    names, init, e1, _ = _run(tmp_path, freeze=0)
    assert all(not torch.allclose(e1[k], init[k]) for k in names if k.endswith("original1"))
