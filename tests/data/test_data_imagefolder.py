"""ImageFolder on PNGs written by PIL in the test (PNG is lossless, so pixels are exact)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from headgeom.data import load_dataset, load_imagefolder


def write_png(path: Path, array: np.ndarray, mode: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode).save(path)


def pattern(seed: int, h: int = 6, w: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def make_tree(root: Path) -> dict[str, list[np.ndarray]]:
    """Classes written out of order to check sorting; files named so sorted order is known."""
    content = {"zebra": [pattern(1), pattern(2)], "ant": [pattern(3)], "moth": [pattern(4),
                                                                                 pattern(5)]}
    for cls, arrays in content.items():
        for k, arr in enumerate(arrays):
            write_png(root / cls / f"img_{k}.png", arr)
    (root / "ant" / "notes.txt").write_text("not an image")
    return content


def test_pixels_labels_and_sorted_classes(tmp_path):
    content = make_tree(tmp_path)
    ds = load_imagefolder(tmp_path, split=None)
    assert ds.classes == ["ant", "moth", "zebra"] and ds.split == "all"
    assert ds.images.dtype == torch.uint8 and ds.images.shape == (5, 3, 6, 5)
    expected = [(0, content["ant"][0]), (1, content["moth"][0]), (1, content["moth"][1]),
                (2, content["zebra"][0]), (2, content["zebra"][1])]
    assert ds.labels.tolist() == [label for label, _ in expected]
    for n, (_, arr) in enumerate(expected):
        # (H, W, C) file → (C, H, W): channel c of the tensor is arr[..., c]
        assert torch.equal(ds.images[n], torch.from_numpy(arr).permute(2, 0, 1))


def test_split_subfolders(tmp_path):
    make_tree(tmp_path / "train")
    write_png(tmp_path / "test" / "ant" / "a.png", pattern(9))
    write_png(tmp_path / "test" / "moth" / "b.jpg", pattern(10))
    write_png(tmp_path / "test" / "zebra" / "c.bmp", pattern(11))
    train = load_imagefolder(tmp_path, "train")
    test = load_dataset("imagefolder", "test", data_dir=tmp_path)
    assert (len(train), train.split) == (5, "train")
    assert (len(test), test.split, test.classes) == (3, "test", ["ant", "moth", "zebra"])
    assert torch.equal(test.images[2], torch.from_numpy(pattern(11)).permute(2, 0, 1))  # bmp
    with pytest.raises(FileNotFoundError, match="val"):
        load_imagefolder(tmp_path, "val")
    with pytest.raises(ValueError, match="split="):
        load_imagefolder(tmp_path, None)


def test_root_without_split_folders_is_the_split(tmp_path):
    make_tree(tmp_path)
    assert load_imagefolder(tmp_path, "train").split == "train"


def test_grayscale_and_rgba_become_rgb(tmp_path):
    gray = np.arange(30, dtype=np.uint8).reshape(6, 5)
    write_png(tmp_path / "a" / "g.png", gray, "L")
    rgba = np.concatenate([pattern(7), np.full((6, 5, 1), 128, np.uint8)], axis=2)
    write_png(tmp_path / "b" / "r.png", rgba, "RGBA")
    ds = load_imagefolder(tmp_path, None)
    assert ds.images.shape == (2, 3, 6, 5)
    for c in range(3):
        assert torch.equal(ds.images[0, c], torch.from_numpy(gray))
    assert torch.equal(ds.images[1], torch.from_numpy(pattern(7)).permute(2, 0, 1))


def test_resize(tmp_path):
    write_png(tmp_path / "a" / "big.png", np.full((40, 20, 3), (10, 20, 30), np.uint8))
    write_png(tmp_path / "b" / "small.png", pattern(3))
    with pytest.raises(ValueError, match="size="):
        load_imagefolder(tmp_path, None)
    ds = load_imagefolder(tmp_path, None, size=8)
    assert ds.images.shape == (2, 3, 8, 8)
    # a constant image stays constant under bilinear resampling
    assert ds.images[0, :, :, :].flatten(1).unique(dim=1).tolist() == [[10], [20], [30]]
    assert load_imagefolder(tmp_path, None, size=(4, 6)).images.shape == (2, 3, 4, 6)


def test_errors_speak(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_imagefolder(tmp_path / "missing", None)
    (tmp_path / "empty_root").mkdir()
    with pytest.raises(ValueError, match="no class sub-folders"):
        load_imagefolder(tmp_path / "empty_root", None)
    write_png(tmp_path / "r" / "cat" / "a.png", pattern(1))
    (tmp_path / "r" / "dog").mkdir()
    (tmp_path / "r" / "dog" / "readme.txt").write_text("x")
    with pytest.raises(ValueError, match=r"\['dog'\]"):
        load_imagefolder(tmp_path / "r", None)
    (tmp_path / "r" / "dog" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png"):
        load_imagefolder(tmp_path / "r", None)
    with pytest.raises(ValueError, match="data_dir"):
        load_dataset("imagefolder")
