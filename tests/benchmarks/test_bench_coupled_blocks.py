"""benchmarks/bench_coupled_blocks.py: its baseline (d HVPs per sample) and headgeom's blocks agree
with each other and with dense float64 autograd on a tiny NT-Xent problem (no timings checked)."""
import pytest
import torch
from torch.func import hessian, jacrev

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_coupled_blocks")


@pytest.mark.parametrize("loss_name", ["nt_xent", "vicreg", "barlow_twins"])
def test_baseline_equals_dense_autograd(script, loss_name):
    head, loss, z = script.problem(d=6, k=3, n=8, b=3, loss_name=loss_name)
    got = script.baseline_blocks(head, loss, z).detach()
    with torch.no_grad():
        u = head(z)
    h = hessian(loss)(u)  # (b, k, b, k)
    for i in range(3):
        j = jacrev(lambda zi: head(zi[None])[0])(z[i]).detach()  # (k, d)
        torch.testing.assert_close(got[i], j.T @ h[i, :, i, :] @ j, rtol=1e-10, atol=1e-12)


def test_main_compares_before_it_times(script, tmp_path):
    res = script.main(["--loss", "vicreg", "--dims", "4,9", "--k", "3", "--n", "8", "--b", "2", "--repeats", "1",
                       "--json", str(tmp_path / "r.json")])
    assert [r["d"] for r in res["rows"]] == [4, 9]
    assert all(r["max_rel_diff"] < 1e-12 and r["speedup"] > 0 and r["speedup_hvp_path"] > 0 for r in res["rows"])
    assert (tmp_path / "r.json").exists()
