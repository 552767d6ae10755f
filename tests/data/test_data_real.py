"""The loaders on the real CIFAR-10 images (binary layout built from a JPEG copy).

``tools/make_cifar10.py`` writes the official binary layout from the JPEG archive that
``$HEADGEOM_CIFAR10_JPEG`` names (tests/real_data.py) in ~10-50 s. Skipped with a reason when
the variable is unset or names nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from real_data import MAKE_CIFAR10, cifar10_jpeg_archive

from headgeom.data import DATASET_STATS, load_cifar10, load_dataset


@pytest.fixture(scope="session")
def real_cifar10_root(tmp_path_factory) -> Path:
    archive = cifar10_jpeg_archive()
    out = tmp_path_factory.mktemp("real_cifar10")
    proc = subprocess.run([sys.executable, str(MAKE_CIFAR10), str(archive), str(out)], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"{MAKE_CIFAR10} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return out


@pytest.fixture(scope="session")
def real_train(real_cifar10_root):
    return load_cifar10(real_cifar10_root, "train")


def test_real_split_sizes_and_balance(real_cifar10_root, real_train):
    test = load_dataset("cifar10", "test", data_dir=real_cifar10_root)
    assert real_train.images.shape == (50_000, 3, 32, 32)
    assert test.images.shape == (10_000, 3, 32, 32)
    assert real_train.class_counts().tolist() == [5_000] * 10
    assert test.class_counts().tolist() == [1_000] * 10
    assert real_train.classes == ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                  "frog", "horse", "ship", "truck"]


def test_real_channel_means(real_train):
    mean, std = real_train.channel_stats()
    expected = torch.tensor([125.3, 123.0, 113.9]) / 255
    assert torch.allclose(torch.tensor(mean), expected, atol=0.5 / 255, rtol=0), mean
    # the stored constants describe these images too (JPEG moves std a little)
    assert torch.allclose(torch.tensor(mean), torch.tensor(DATASET_STATS["cifar10"].mean),
                          atol=0.5 / 255, rtol=0)
    assert torch.allclose(torch.tensor(std), torch.tensor(DATASET_STATS["cifar10"].std),
                          atol=0.005, rtol=0), std


def test_real_channels_are_rgb(real_train):
    """Sky in airplane images is blue; a B/R plane swap would flip this."""
    planes = real_train.subset(real_train.labels == 0).to_float().mean(dim=(0, 2, 3))
    assert planes[2] > planes[0] + 0.02, planes
