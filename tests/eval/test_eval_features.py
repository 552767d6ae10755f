"""Feature extraction at the points of the guillotine sweep (headgeom.eval.features)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.data import ImageDataset
from headgeom.eval.features import (extract_features, feature_points, head_features,
                                    image_batches, point_modules, point_names)
from headgeom.heads import head_from


def tiny_backbone(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten())  # (B, 16)


def tiny_head(spec: str = "16-12-6:relu:bn:last=bn", seed: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    head = head_from(spec)
    # non-trivial running statistics, so eval mode is visible in the outputs
    for m in head.layers:
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    return head


def images(n: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n, 3, 6, 6), generator=torch.Generator().manual_seed(seed),
                         dtype=torch.uint8)


def test_points_of_a_head_shapes_and_last_point_is_head_of_z():
    backbone, head = tiny_backbone(), tiny_head()
    x = images()
    feats = extract_features(backbone, x, head, batch_size=3)
    assert list(feats) == ["z", "head.0", "head.1", "head.2", "head.3", "head.4"]
    assert [tuple(f.shape) for f in feats.values()] == [(10, 16), (10, 12), (10, 12), (10, 12),
                                                         (10, 6), (10, 6)]
    backbone.eval(), head.eval()
    with torch.no_grad():
        z = backbone(x.float() / 255)
        torch.testing.assert_close(feats["z"], z)
        torch.testing.assert_close(feats["head.4"], head(z))
        layers = head.layers
        torch.testing.assert_close(feats["head.2"], layers[2](layers[1](layers[0](z))))
    assert point_modules(head) == {"z": "backbone output", "head.0": "Linear(16->12)",
                                   "head.1": "BatchNorm1d(12)", "head.2": "ReLU",
                                   "head.3": "Linear(12->6)", "head.4": "BatchNorm1d(6)"}


def test_eval_mode_no_grad_batch_invariance_and_mode_restored():
    backbone, head = tiny_backbone(), tiny_head()
    backbone.train(), head.train()
    x = images(9)
    a = extract_features(backbone, x, head, batch_size=2)
    b = extract_features(backbone, x, head, batch_size=9)
    for p in a:  # eval-mode BatchNorm: each sample independent of its batch
        torch.testing.assert_close(a[p], b[p])
        assert not a[p].requires_grad and a[p].dtype == torch.float32
    assert backbone.training and head.training and all(m.training for m in head.modules())
    head.train()
    with torch.no_grad():
        train_mode = head(backbone.eval()(x.float() / 255))
    assert not torch.allclose(train_mode, a["head.4"])  # train-mode BN would differ


def test_l2_input_variant_and_chained_heads():
    backbone, head = tiny_backbone(), tiny_head()
    pred = tiny_head("6-8-6:relu", seed=2)
    x = images(5)
    chain = {"head": head, "pred": pred}
    names = point_names(chain, ("raw", "l2"))
    assert names[:1] == ["z"] and "pred.2" in names and "l2z/head.0" in names
    assert "l2z/z" not in names and len(names) == 1 + 2 * (5 + 3)
    feats = extract_features(backbone, x, chain, head_input=("raw", "l2"))
    assert list(feats) == names
    backbone.eval(), head.eval(), pred.eval()
    with torch.no_grad():
        z = backbone(x.float() / 255)
        torch.testing.assert_close(feats["l2z/head.4"], head(F.normalize(z, dim=1)))
        torch.testing.assert_close(feats["pred.2"], pred(head(z)))
        torch.testing.assert_close(feats["l2z/pred.2"], pred(head(F.normalize(z, dim=1))))
    only = extract_features(backbone, x, chain, points=["z", "pred.2"])
    assert list(only) == ["z", "pred.2"]
    torch.testing.assert_close(only["pred.2"], feats["pred.2"])


def test_points_from_stored_z_equal_the_full_extraction():
    backbone, head = tiny_backbone(), tiny_head()
    pred = tiny_head("6-8-6:relu", seed=2)
    chain = {"head": head, "pred": pred}
    x = images(7)
    full = extract_features(backbone, x, chain, head_input=("raw", "l2"))
    z = full["z"]
    head.train()  # eval mode is switched on inside and the flag restored
    for p in full:
        torch.testing.assert_close(head_features(z, chain, p, batch_size=3), full[p])
    assert head.training
    with pytest.raises(ValueError, match="unknown feature point 'pred.7'"):
        head_features(z, chain, "pred.7")


def test_a_head_without_layers_is_one_point():
    feats = feature_points(torch.randn(4, 16), {"proj": nn.Linear(16, 3)})
    assert list(feats) == ["z", "proj"] and feats["proj"].shape == (4, 3)


def test_normalisation_and_transform_order():
    x = images(4)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    flip = lambda t: t.flip(-1)  # noqa: E731
    got = torch.cat(list(image_batches(x, 3, "cpu", mean, std, flip)))
    ref = (x.double().flip(-1) / 255 - torch.tensor(mean).view(1, 3, 1, 1).double()) \
        / torch.tensor(std).view(1, 3, 1, 1).double()
    torch.testing.assert_close(got.double(), ref, rtol=1e-6, atol=1e-6)
    data = ImageDataset(x, torch.zeros(4, dtype=torch.long), ["a"], "t", "test")
    feats = extract_features(nn.Flatten(), data, mean=mean, std=std)
    torch.testing.assert_close(feats["z"].double(), ((x.double() / 255 - torch.tensor(mean).view(
        1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)).flatten(1), rtol=1e-6, atol=1e-6)


def test_error_paths():
    backbone, head = tiny_backbone(), tiny_head()
    with pytest.raises(ValueError, match=r"unknown feature point\(s\) \['head.9'\]"):
        extract_features(backbone, images(2), head, points=["head.9"])
    with pytest.raises(ValueError, match="head_input must be one of"):
        extract_features(backbone, images(2), head, head_input="normalised")
    with pytest.raises(ValueError, match="expects inputs with last dim 6"):
        extract_features(backbone, images(2), {"pred": tiny_head("6-8-6:relu"), "head": head})
    with pytest.raises(TypeError, match="uint8"):
        extract_features(backbone, images(2).float(), head)
    with pytest.raises(ValueError, match="empty"):
        extract_features(backbone, images(0), head)
    with pytest.raises(ValueError, match="not usable as a point prefix"):
        extract_features(backbone, images(2), {"z": head})
    with pytest.raises(ValueError, match=r"backbone must return \(B, d\)"):
        extract_features(nn.Identity(), images(2), None)
