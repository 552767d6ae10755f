"""The orbit images of a trained run's measurement (headgeom.orbits.run_measures): a seeded choice
per class, and clear errors when the data cannot supply it. The measurement end to end runs in
test_c11_depth.py's tiny cell."""
import pytest
import torch

from headgeom.data import ImageDataset
from headgeom.orbits.run_measures import orbit_images


def test_orbit_images_pick_per_class_and_fail_clearly():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 0])
    data = ImageDataset(torch.arange(9, dtype=torch.uint8).view(9, 1, 1, 1).expand(9, 3, 2, 2).contiguous(), labels,
                        ["a", "b", "c"], "toy", "test")
    images, y = orbit_images(data, 2, 3, seed=0)
    assert y.tolist() == [0, 0, 0, 1, 1, 1]
    assert set(images[:3, 0, 0, 0].tolist()) <= {0, 3, 6, 8} and set(images[3:, 0, 0, 0].tolist()) == {1, 4, 7}
    assert torch.equal(images, orbit_images(data, 2, 3, seed=0)[0])  # seeded
    with pytest.raises(ValueError, match="fewer than orbit_per_class"):
        orbit_images(data, 3, 3, seed=0)
    with pytest.raises(ValueError, match="has 3 classes"):
        orbit_images(data, 4, 2, seed=0)
