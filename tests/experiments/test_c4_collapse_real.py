"""C4's measured init on real CIFAR-10 images (``$HEADGEOM_CIFAR10_JPEG``; skipped with a reason without it):
the cell reads the archive, measures a view gap on every image and reproduces its state in the gap sweep.
No verdict or number of the paper is asserted."""
import math

from real_data import cifar10_jpeg_archive

from headgeom.experiments.c4_collapse import MEASURED, C4Config, cells, run_cell
from headgeom.experiments.c4_collapse import measure

TINY = C4Config(activations=("silu",), states=(MEASURED,), readings=("tangential",), seeds=1, backbone_width=0.0625,
                cifar_hidden=48, cifar_k=48, cifar_per_class=2, cifar_samples=3)


def test_the_measured_init_on_real_images(monkeypatch, tmp_path):
    archive = cifar10_jpeg_archive()
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path / "empty"))  # the JPEG archive, not a binary copy
    monkeypatch.setenv("HEADGEOM_CIFAR10_JPEG", str(archive))
    measure._features.cache_clear()
    (cell,) = cells(TINY, None)
    assert cell["data"] == f"jpeg {archive}"
    m = run_cell(TINY, cell)
    measure._features.cache_clear()
    assert m["status"] == "measured" and m["n_images"] == 20 and m["data_source"] == f"jpeg {archive}"
    # two crops of one photo through a random network: apart, but far from orthogonal
    gaps = m["view_gap_deg"]
    assert len(gaps) == 20 and all(0 < g < 90 for g in gaps) and all(math.isfinite(g) for g in m["view_gap_z_deg"])
    assert m["sweep_vs_point"] <= 1e-8
    assert [e["multiplier"] for e in m["gap_sweep"]] == list(TINY.gap_multipliers)
