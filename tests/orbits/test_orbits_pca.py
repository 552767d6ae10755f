"""headgeom.orbits.pca: the 2-D PCA of orbits against numpy's eigendecomposition, and the panels
handed to the figure (drawn in tests/report/plots/test_plots_orbits.py)."""

import numpy as np
import pytest
import torch

from headgeom.orbits.pca import orbit_pca_panels, pca_project


def _features(seed=0, shape=(4, 6, 10)):
    return np.random.default_rng(seed).normal(size=shape) + 2.0


def test_pca_projection_matches_numpy():
    f = _features()
    coords, frac = pca_project(torch.from_numpy(f))
    u = f / np.linalg.norm(f, axis=-1, keepdims=True)
    x = u.reshape(24, 10) - u.reshape(24, 10).mean(axis=0)
    lam, vec = np.linalg.eigh(x.T @ x)
    top = vec[:, ::-1][:, :2]
    ref = (x @ top).reshape(4, 6, 2)
    for j in range(2):  # principal axes are defined up to sign
        sign = np.sign(np.sum(ref[..., j] * coords[..., j].numpy()))
        np.testing.assert_allclose(coords[..., j].numpy(), sign * ref[..., j], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(frac.numpy(), lam[::-1][:2] / lam.sum(), rtol=1e-10)


def test_a_one_dimensional_point_gets_a_zero_second_component():
    coords, frac = pca_project(torch.from_numpy(_features(shape=(3, 4, 1))), normalise=False)
    assert coords.shape == (3, 4, 2) and bool((coords[..., 1] == 0).all())
    assert frac.tolist() == [pytest.approx(1.0), 0.0]


def test_panels_hold_plain_numbers_of_the_first_orbits_in_the_asked_order():
    f = _features(shape=(5, 6, 10))
    features = {"z": torch.from_numpy(f), "h": torch.from_numpy(f[..., :3])}
    panels = orbit_pca_panels(features, torch.tensor([0, 1, 2, 1, 0]), points=["h", "z"], max_orbits=4)
    assert [p["point"] for p in panels] == ["h", "z"] and [p["dim"] for p in panels] == [3, 10]
    coords, frac = pca_project(features["h"][:4])
    assert panels[0]["coords"] == coords.tolist() and panels[0]["explained"] == frac.tolist()
    assert panels[0]["classes"] == [0, 1, 2, 1] and type(panels[0]["coords"][0][0][0]) is float
    assert [p["classes"] for p in orbit_pca_panels(features)] == [None, None]
    with pytest.raises(ValueError, match=r"unknown point\(s\) \['x'\]"):
        orbit_pca_panels(features, points=["x"])
    with pytest.raises(ValueError, match="3 labels for 5 orbits"):
        orbit_pca_panels(features, [0, 1, 0])
