"""The 4-way rotation probe (headgeom.eval.rotation): labels, images, features, learnability."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from headgeom.eval.features import extract_features
from headgeom.eval.rotation import rotate_images, rotation_dataset, rotation_features, rotation_probe


def test_label_construction_and_rotated_pixels():
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.uint8).reshape(2, 3, 4, 4)
    rotated, labels = rotation_dataset(x)
    assert rotated.shape == (8, 3, 4, 4) and rotated.dtype == torch.uint8
    assert labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]  # rotation-major
    for k in range(4):
        for i in range(2):
            ref = np.rot90(x[i].numpy(), k, axes=(1, 2))  # numpy's counter-clockwise rot90
            np.testing.assert_array_equal(rotated[2 * k + i].numpy(), ref)
    # one quarter turn counter-clockwise: the top-right pixel moves to the top-left
    img = torch.zeros(1, 1, 3, 3)
    img[0, 0, 0, 2] = 1
    assert rotate_images(img, 1)[0, 0, 0, 0] == 1
    assert rotate_images(img, 2)[0, 0, 2, 0] == 1  # half turn: to the bottom-left
    with pytest.raises(ValueError, match="square images"):
        rotate_images(torch.zeros(1, 3, 4, 6), 1)
    assert rotate_images(torch.zeros(1, 3, 4, 6), 2).shape == (1, 3, 4, 6)


def test_streamed_features_equal_features_of_the_rotated_set():
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Conv2d(3, 5, 3), nn.ReLU(), nn.Flatten())
    head = nn.Sequential(nn.Linear(5 * 4 * 4, 7), nn.Tanh())
    x = torch.randint(0, 256, (5, 3, 6, 6), dtype=torch.uint8)
    feats, labels = rotation_features(backbone, x, {"head": head}, batch_size=2,
                                      mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    rotated, ref_labels = rotation_dataset(x)
    ref = extract_features(backbone, rotated, {"head": head}, mean=(0.5, 0.5, 0.5),
                           std=(0.25, 0.25, 0.25))
    assert torch.equal(labels, ref_labels) and list(feats) == ["z", "head.0", "head.1"]
    for p in feats:
        torch.testing.assert_close(feats[p], ref[p])


def oriented_images(n: int, seed: int) -> torch.Tensor:
    """Noise images with a bright top band and a dark left band: their rotation is visible."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(60, 140, (n, 3, 8, 8), generator=g, dtype=torch.uint8)
    x[:, :, :2, :] = 250
    x[:, :, 2:, :2] = 0
    return x


def test_rotation_is_learnable_from_pixels_and_not_from_an_invariant_feature():
    train, test = oriented_images(30, 0), oriented_images(20, 1)
    res = rotation_probe(nn.Flatten(), train, test, None)
    assert res["z"]["test_top1"] == 1.0
    # sorted pixel values are exactly rotation invariant: the four copies of an image get
    # identical features, hence one prediction, hence exactly chance (1 of 4 right)
    invariant = rotation_probe(lambda x: x.flatten(2).sort(dim=2).values[:, :, ::4].flatten(1),
                               train, test, None)
    assert invariant["z"]["test_top1"] == 0.25


def test_error_paths():
    with pytest.raises(ValueError, match="square images"):
        rotation_features(nn.Flatten(), torch.zeros(2, 3, 4, 6, dtype=torch.uint8))
    with pytest.raises(TypeError, match="sets the transform itself"):
        rotation_features(nn.Flatten(), torch.zeros(2, 3, 4, 4, dtype=torch.uint8),
                          transform=lambda x: x)
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        rotation_dataset(torch.zeros(3, 4, 4))
