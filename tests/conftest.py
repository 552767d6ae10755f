"""Shared test settings: float64 references, few threads (CI has 2 cores); loading benchmarks/."""
from pathlib import Path

import pytest
import torch

from headgeom.threads import torch_threads
from headgeom.train import TrainConfig, train
from script_modules import load_script

torch.set_num_threads(2)


@pytest.fixture(scope="session", autouse=True)
def own_cache_folder(tmp_path_factory):
    """An empty cache folder ($XDG_CACHE_HOME) for the session: a copy of the authors' released results
    that `headgeom released fetch` put in this machine's ~/.cache/headgeom/released is found without an
    option (headgeom.released.manifest.default_released_dir), and must not change what the tests see."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg_cache")))
        yield


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of many tiny problems (on 2 shared cores thread hand-offs
    cost more than the ops); opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    with torch_threads(1):
        yield


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def benchmark_script():
    """``benchmark_script("quality")`` imports benchmarks/quality.py (not a package) as a module."""
    return lambda name: load_script(BENCHMARKS / f"{name}.py")


@pytest.fixture(scope="session")
def one_step_run(tmp_path_factory):
    """A one-step SimSiam run with its checkpoint (read-only for the tests that take it: copy it to
    change it): the input of eval, analyze, checkpoint and train --resume in the error tests."""
    out = tmp_path_factory.mktemp("one_step") / "run"
    train(TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.125}, head="d-16-8",
                      predictor="8-4-8", data="shapes", data_options={"n": 16, "size": 16}, batch_size=8,
                      max_steps=1, progress=False, device="cpu"), out)
    return out
