"""benchmarks/quality.py: the small presets build every method, and the table reports the
trained-minus-random differences of the numbers it is given (no training here)."""
import pytest

from headgeom.train import build_method_from_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("quality")


@pytest.mark.parametrize("method", ["simclr", "simsiam", "byol", "vicreg", "barlow_twins", "dino"])
def test_small_preset_builds_the_method_on_a_width_quarter_resnet18(method, script):
    q = script
    config = q.small_preset(method, "/nowhere", epochs=3)
    assert (config.method, config.backbone, config.backbone_options) == (method, "resnet18", {"width": 0.25})
    assert config.data == "cifar10" and config.epochs == 3 and config.batch_size == 256
    m = build_method_from_config(config)
    assert m.backbone.feature_dim == 128
    assert m.spec.head.startswith("128-")


def test_unknown_method_is_refused(script):
    with pytest.raises(ValueError, match="unknown method 'moco'"):
        script.small_preset("moco", "/nowhere", epochs=1)


def test_table_reports_differences_to_the_random_backbone(script):
    rows = [{"method": "simclr", "epoch": 3.0, "knn": 41.25, "random_knn": 30.5, "linear": 45.0,
             "random_linear": 38.75, "images_per_s": 300.0}]
    line = script.table(rows).splitlines()[-1]
    assert "41.25 / 30.50 (+10.75)" in line and "45.00 / 38.75 (+6.25)" in line and "| 300 |" in line
    rows[0]["knn"] = 28.0
    assert "28.00 / 30.50 (-2.50)" in script.table(rows)
