"""benchmarks/bench_gpu_epoch.py: the GPU seconds-per-epoch benchmark runs its code path on the
CPU (a smoke run on `shapes`), and its figure is steps · B / images_per_s."""
import json

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_gpu_epoch")



def test_config_is_the_benchmark_setting(script):
    c = script.gpu_config("/data", 3, 512, 1.0, True, True, "cuda")
    assert (c.method, c.backbone, c.backbone_options, c.batch_size) == ("simclr", "resnet18", {"width": 1.0}, 512)
    assert c.lr == pytest.approx(0.06 * 4) and c.bf16 and c.channels_last and c.device == "cuda"


def test_seconds_per_epoch_formula_and_error(script):
    mod = script
    assert mod.seconds_per_epoch({"images_per_s": 1024.0}, 97, 512) == pytest.approx(97 * 512 / 1024)
    with pytest.raises(ValueError, match="fewer than two steps"):
        mod.seconds_per_epoch({"images_per_s": None}, 97, 512)


def test_cpu_smoke_run_writes_its_json(tmp_path, capsys, script):
    out = tmp_path / "gpu.json"
    res = script.main(["--device", "cpu", "--shapes", "48", "--batch-size", "16", "--epochs", "1",
                          "--width", "0.125", "--json", str(out)])
    saved = json.loads(out.read_text())
    assert saved["steps_per_epoch"] == 3 and saved["done"]["step"] == 3
    assert saved["seconds_per_epoch"] == pytest.approx(3 * 16 / saved["done"]["images_per_s"])
    assert res["seconds_per_epoch"] > 0 and "s per epoch" in capsys.readouterr().out


def test_without_cuda_it_says_so(script):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(SystemExit, match="no CUDA device"):
        script.main(["--data-dir", "/nowhere"])
