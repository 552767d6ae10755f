"""ImageDataset container and the dataset registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headgeom.data import (DATASET_STATS, DATASETS, ImageDataset, dataset_stats, load_dataset,
                           make_shapes)


def small(n: int = 6) -> ImageDataset:
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n, 3, 4, 5), generator=g, dtype=torch.uint8)
    return ImageDataset(images, torch.arange(n) % 3, ["a", "b", "c"], "toy", "train")


def test_basic_properties():
    ds = small()
    assert len(ds) == 6 and ds.num_classes == 3 and ds.image_size == (4, 5)
    assert ds.class_counts().tolist() == [2, 2, 2]
    assert "toy" in repr(ds) and "4x5" in repr(ds)


def test_to_float_is_pixel_over_255():
    ds = small()
    f = ds.to_float()
    assert f.dtype == torch.float32 and f.shape == ds.images.shape
    expected = ds.images.numpy().astype(np.float64) / 255.0
    np.testing.assert_allclose(f.numpy(), expected, rtol=0, atol=1e-7)
    assert ds.images.dtype == torch.uint8  # unchanged


@pytest.mark.parametrize("index", [[4, 0, 4], np.array([5, 1]), torch.tensor([2, 3]),
                                   slice(1, 4), torch.tensor([True, False] * 3), []])
def test_subset(index):
    ds = small()
    sub = ds.subset(index)
    ref = (list(range(6))[index] if isinstance(index, slice)
           else [i for i, keep in enumerate(index.tolist()) if keep]
           if isinstance(index, torch.Tensor) and index.dtype == torch.bool
           else list(np.asarray(index, dtype=np.int64)))
    assert len(sub) == len(ref)
    for k, i in enumerate(ref):
        assert torch.equal(sub.images[k], ds.images[i]) and sub.labels[k] == ds.labels[i]
    assert (sub.classes, sub.name, sub.split) == (ds.classes, ds.name, ds.split)


def test_subset_errors():
    ds = small()
    with pytest.raises(IndexError, match="6 images"):
        ds.subset([0, 6])
    with pytest.raises(TypeError, match="integer"):
        ds.subset(torch.tensor([0.5]))
    with pytest.raises(ValueError, match="mask"):
        ds.subset(torch.tensor([True, False]))


def test_channel_stats_match_numpy():
    ds = small(50)
    mean, std = ds.channel_stats()
    x = ds.images.numpy().astype(np.float64) / 255.0
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(std, x.std(axis=(0, 2, 3)), rtol=1e-12)


@pytest.mark.parametrize("images,labels,err,match", [
    (torch.zeros(2, 3, 4, 4), torch.zeros(2, dtype=torch.int64), TypeError, "uint8"),
    (torch.zeros(2, 4, 4, 3, dtype=torch.uint8), torch.zeros(2, dtype=torch.int64), ValueError,
     r"\(N, 3, H, W\)"),
    (torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.zeros(2, dtype=torch.int32), TypeError,
     "int64"),
    (torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.zeros(3, dtype=torch.int64), ValueError,
     "match"),
    (torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.tensor([0, 3]), ValueError, "3 classes"),
])
def test_validation(images, labels, err, match):
    with pytest.raises(err, match=match):
        ImageDataset(images, labels, ["a", "b", "c"], "x", "train")


# ----------------------------------------------------------------- registry
def test_registry_names_and_unknown_name():
    assert sorted(DATASETS) == ["cifar10", "cifar100", "imagefolder", "shapes"]
    with pytest.raises(ValueError) as err:
        load_dataset("cifar-10")
    for name in DATASETS:
        assert name in str(err.value)


def test_unknown_keyword_is_named():
    with pytest.raises(TypeError, match="shapes.*colour"):
        load_dataset("shapes", n=10, colour="red")


def test_cifar_registry_path_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        load_dataset("cifar10", data_dir=tmp_path)
    with pytest.raises(ValueError, match="medium"):
        load_dataset("cifar100", data_dir=tmp_path, label_type="medium")


def test_stats_constants():
    # published values (torchvision/ImageNet convention; CIFAR over all training pixels)
    assert DATASET_STATS["imagenet"].mean == (0.485, 0.456, 0.406)
    assert DATASET_STATS["imagenet"].std == (0.229, 0.224, 0.225)
    for name in ("cifar10", "cifar100"):
        s = DATASET_STATS[name]
        assert all(0.4 < m < 0.55 for m in s.mean) and all(0.24 < v < 0.28 for v in s.std)
    assert dataset_stats("cifar10") is DATASET_STATS["cifar10"]


def test_stats_measured_for_other_datasets():
    ds = make_shapes(200)
    stats = dataset_stats("shapes", ds)
    x = ds.images.numpy().astype(np.float64) / 255.0
    np.testing.assert_allclose(stats.mean, x.mean(axis=(0, 2, 3)), rtol=1e-12)
    with pytest.raises(ValueError, match="pass the training"):
        dataset_stats("shapes")
