"""The evaluation sweep end to end on a few hundred real CIFAR-10 images.

Reads the first 60 test images of each class straight from the JPEG archive that
``$HEADGEOM_CIFAR10_JPEG`` names (tests/real_data.py; the test folder comes first in the
archive, so only its start is decompressed), splits them 40/20 per
class, and evaluates a fixed pooled-pixel "backbone" (4×4 average pooling, 192-d) with a
random head. Pixels carry real signal: class kNN and linear probes beat chance (10%), and
the rotation probe beats chance (25%) because natural photos have an up (sky, ground).
Skipped with a reason when the variable is unset or names nothing.
"""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
import torch
from real_data import cifar10_jpeg_archive
from torch import nn

from headgeom.data import DATASET_STATS, ImageDataset
from headgeom.eval.evaluate import EvalConfig, evaluate_model
from headgeom.heads import head_from

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]


def read_test_jpegs(per_class: int) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    archive = cifar10_jpeg_archive()
    got: dict[str, list[np.ndarray]] = {c: [] for c in CLASSES}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:  # streamed: stop as soon as every class is full
            parts = member.name.split("/")
            if not member.isfile() or len(parts) != 4 or parts[1] != "test":
                continue
            if len(got[parts[2]]) < per_class:
                data = tar.extractfile(member).read()
                got[parts[2]].append(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
            if all(len(v) == per_class for v in got.values()):
                break
    images = np.stack([im for c in CLASSES for im in got[c]]).transpose(0, 3, 1, 2)
    labels = np.repeat(np.arange(10), per_class)
    return images, labels


def test_sweep_on_real_cifar10_images():
    images, labels = read_test_jpegs(60)
    assert images.shape == (600, 3, 32, 32)
    first = np.tile(np.arange(60) < 40, 10)  # 40 per class to train, 20 to test
    x, y = torch.from_numpy(images.copy()), torch.from_numpy(labels)
    train = ImageDataset(x[first], y[first], CLASSES, "cifar10", "train")
    test = ImageDataset(x[~first], y[~first], CLASSES, "cifar10", "test")
    torch.manual_seed(0)
    head = head_from("192-64-32:relu:bn")
    stats = DATASET_STATS["cifar10"]
    res = evaluate_model(nn.Sequential(nn.AvgPool2d(4), nn.Flatten()), {"head": head}, train,
                         test, mean=stats.mean, std=stats.std,
                         config=EvalConfig(k=(20,), points=("z", "head.3")))
    z = res["points"]["z"]
    # chance: 10% (classes, 200 test images) and 25% (rotations, 800 rotated test images)
    assert z["knn_top1"]["20"] > 0.15, z
    assert z["linear"]["test_top1"] > 0.15, z
    assert z["rotation_linear"]["test_top1"] > 0.30, z
    assert res["points"]["head.3"]["dim"] == 32 and z["dim"] == 192
    assert 1.0 < z["stats"]["rankme"] <= 192 and z["stats"]["cov_n_kept"] <= 192
