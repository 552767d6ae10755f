"""CIFAR-10 test images from the JPEG archive or the binary layout (headgeom.data.cifar_jpeg).

A tiny archive in the CIFAR-10 JPEG layout is written here (flat colours, which JPEG decodes back to within a
few levels); the real archive, where ``$HEADGEOM_CIFAR10_JPEG`` names it, is read against an
independent reader written in the test.
"""
import io
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image
from real_data import cifar10_jpeg_archive

from headgeom.data import cifar_jpeg
from headgeom.data.cifar_jpeg import CLASSES, JPEG_ENV_VAR, cifar10_test_images, locate_cifar10, missing_message


def _archive(path, per_class: int, size: int = 32):
    """<top>/{test,train}/<class>/<i>.jpg with each image a flat colour that names its class and index."""
    with tarfile.open(path, "w:gz") as tar:
        for split in ("test", "train"):
            for c, name in enumerate(CLASSES):
                for i in range(per_class):
                    buf = io.BytesIO()
                    Image.new("RGB", (size, size), (20 * c, 40 * i, 200 if split == "test" else 0)).save(buf, "JPEG",
                                                                                                      quality=95)
                    info = tarfile.TarInfo(f"cifar10/{split}/{name}/{i:04d}.jpg")
                    info.size = len(buf.getvalue())
                    tar.addfile(info, io.BytesIO(buf.getvalue()))
    return path


@pytest.fixture
def no_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path / "empty"))
    return tmp_path


def test_the_archive_is_read_class_interleaved(no_binary, monkeypatch):
    archive = _archive(no_binary / "cifar10-jpeg.tar.gz", per_class=3)
    monkeypatch.setenv(JPEG_ENV_VAR, str(no_binary))  # the folder holding it works as well as the file
    assert locate_cifar10() == ("jpeg", archive)
    ds, source = cifar10_test_images(2)
    assert source == f"jpeg {archive}" and ds.images.shape == (20, 3, 32, 32) and ds.images.dtype == torch.uint8
    assert ds.labels.tolist() == list(range(10)) * 2 and ds.split == "test"
    # image k of class c in archive order: red 20 c, green 40 k, blue 200 (the test split), up to JPEG rounding
    for j, (c, k) in enumerate([(c, k) for k in range(2) for c in range(10)]):
        pixel = ds.images[j, :, 16, 16].int()
        assert (pixel - torch.tensor([20 * c, 40 * k, 200])).abs().max() <= 3, (j, pixel)
    with pytest.raises(ValueError, match="fewer than 4 test images"):
        cifar10_test_images(4)


def test_without_data_one_error_says_both_ways(no_binary, monkeypatch):
    monkeypatch.delenv(JPEG_ENV_VAR, raising=False)
    assert locate_cifar10() is None
    with pytest.raises(FileNotFoundError) as err:
        cifar10_test_images(2)
    text = str(err.value)
    assert JPEG_ENV_VAR in text and "HEADGEOM_DATA" in text and "docs/setup.md" in text and text == missing_message()
    monkeypatch.setenv(JPEG_ENV_VAR, str(no_binary / "nowhere.tar.gz"))
    assert locate_cifar10() is None and "nowhere.tar.gz" in missing_message()
    with pytest.raises(ValueError, match="per_class"):
        cifar10_test_images(0)


def test_the_binary_layout_comes_first(no_binary, monkeypatch):
    _archive(no_binary / "cifar10-jpeg.tar.gz", per_class=1)
    monkeypatch.setenv(JPEG_ENV_VAR, str(no_binary))
    folder = no_binary / "bin" / "cifar-10-batches-bin"
    monkeypatch.setattr(cifar_jpeg, "find_cifar", lambda name, root: (folder, "binary"))
    x = torch.arange(10 * 4, dtype=torch.int64).reshape(40)
    fake = cifar_jpeg.ImageDataset(torch.zeros(40, 3, 32, 32, dtype=torch.uint8) + (x % 256).to(torch.uint8)[:, None, None, None],
                                   x % 10, list(CLASSES), "cifar10", "test")
    monkeypatch.setattr(cifar_jpeg, "load_cifar", lambda name, root, split: fake)
    assert locate_cifar10() == ("binary", folder)
    ds, source = cifar10_test_images(3)
    assert source.startswith("binary") and ds.labels.tolist() == list(range(10)) * 3
    assert ds.images[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                              20, 21, 22, 23, 24, 25, 26, 27, 28, 29]


def test_the_real_archive_against_an_independent_reader(monkeypatch, tmp_path):
    archive = cifar10_jpeg_archive()
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv(JPEG_ENV_VAR, str(archive))
    ds, _ = cifar10_test_images(3)
    want = {c: [] for c in CLASSES}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 4 and parts[1] == "test" and len(want[parts[2]]) < 3:
                want[parts[2]].append(np.asarray(Image.open(io.BytesIO(tar.extractfile(member).read())).convert("RGB")))
            if all(len(v) == 3 for v in want.values()):
                break
    ref = np.stack([want[c][k] for k in range(3) for c in CLASSES]).transpose(0, 3, 1, 2)
    assert np.array_equal(ds.images.numpy(), ref)
