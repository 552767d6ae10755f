"""HeadGeometryCallback in a real lightning.Trainer on CPU (tests/lightning_tiny.py's module).

- the CSVLogger's file, read back, holds the shared tags headgeom/... at steps 0, K, 2K, ...; the last λ_min
  equals the engine's (headgeom.geometry.effective_hessian blocks, float64 eigh) on the final
  weights, computed here from the module's parts (tolerance 1e-10 relative: the same engine);
- training with the callback ends with bit-identical weights and BatchNorm statistics to
  training without it (measurements between steps, into the second epoch, of a BatchNorm head
  in train mode whose statistics the measurement's forward passes move and must put back);
- DDP, 2 gloo processes (a subprocess, killed after a timeout): rank 0 alone measures, every
  step is logged once, and a SyncBatchNorm head is measured without a collective.
"""
import copy
import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lightning", reason='the Lightning callback needs the "lightning" extra: pip install -e ".[lightning]"')

from lightning.pytorch import Trainer, seed_everything  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

from headgeom.geometry import effective_hessian  # noqa: E402
from headgeom.integrations import HeadGeometryCallback  # noqa: E402
from headgeom.objectives import nt_xent  # noqa: E402
from lightning_tiny import TinySimCLR, loader, pairs, trainer_options  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning",
                                        "ignore:.*log_every_n_steps:UserWarning")

# the shared tags (headgeom.tags) of the monitor's headline numbers, as docs/logging.md lists them: the
# names a native `headgeom train` run's TensorBoard, MLflow and W&B records use for the same numbers
HEADLINE = {"lambda_min": "headgeom/ambient/lambda_min", "lambda_max": "headgeom/ambient/lambda_max",
            "n_negative": "headgeom/ambient/n_negative", "m_ratio": "headgeom/ambient/M_ratio_spectral",
            "rankme": "headgeom/stats/rankme_z", "spread": "headgeom/stats/spread_z"}
LAMBDA_MIN = HEADLINE["lambda_min"]
OP_CONVERGED = "headgeom/ambient/op_converged"  # a coupled (train-mode BatchNorm) head's Lanczos run


def fit(model, root, max_steps, callbacks=()):
    logger = CSVLogger(root, name="csv", version=0)
    Trainer(devices=1, logger=logger, callbacks=list(callbacks), **trainer_options(max_steps)).fit(model, loader())
    return Path(logger.log_dir) / "metrics.csv"


def geometry_rows(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r.get(LAMBDA_MIN)]


def test_logged_lambda_min_is_the_engines_on_the_same_weights(tmp_path):
    model, probe = TinySimCLR(seed=0), pairs(8, seed=1)
    callback = HeadGeometryCallback(loss=nt_xent, probe=probe, every_n_train_steps=2)
    rows = geometry_rows(fit(model, tmp_path, max_steps=4, callbacks=[callback]))
    assert [int(r["step"]) for r in rows] == [0, 2, 4]
    assert all(r[name] != "" for r in rows for name in HEADLINE.values())
    # the measurement at step 4 came after the last optimizer step: the final weights
    model.backbone.eval()
    with torch.no_grad():
        z1, z2 = (model.backbone(x).flatten(1).double() for x in probe)
        head = copy.deepcopy(model.projection_head).double()
        v = head(z2)
    lam = torch.linalg.eigvalsh(effective_hessian(head, lambda u: nt_xent(u, v), z1).blocks())
    assert float(rows[-1][LAMBDA_MIN]) == pytest.approx(float(lam.min()), rel=1e-10)
    assert float(rows[-1][HEADLINE["lambda_max"]]) == pytest.approx(float(lam.max()), rel=1e-10)
    assert float(rows[0][LAMBDA_MIN]) != pytest.approx(float(lam.min()), rel=1e-6)  # training moved it
    assert callback.last_step == 4 and callback.last[LAMBDA_MIN] == float(rows[-1][LAMBDA_MIN])


def test_training_with_the_callback_ends_bit_identical(tmp_path):
    states, init = [], TinySimCLR(bn=True, seed=0).state_dict()
    for with_callback in (False, True):
        seed_everything(0)
        model = TinySimCLR(bn=True, seed=0)
        callbacks = [HeadGeometryCallback(loss=nt_xent, probe=pairs(8, seed=1), every_n_train_steps=2)]
        fit(model, tmp_path / str(with_callback), max_steps=5, callbacks=callbacks if with_callback else [])
        states.append(model.state_dict())
    without, with_ = states
    assert set(without) == set(with_) and any("running_mean" in k for k in with_)
    assert [k for k in without if not torch.equal(without[k], with_[k])] == []
    assert not torch.equal(init["projection_head.0.weight"], with_["projection_head.0.weight"])  # it trained
    assert callbacks[0].last_step == 4 and callbacks[0].last[OP_CONVERGED] == 1.0  # BN head: Lanczos


def test_values_reach_tensorboard(tmp_path):
    """The same keys through lightning's TensorBoardLogger, read back with tensorboard's own reader
    (TensorBoard stores float32 scalars)."""
    pytest.importorskip("tensorboard", reason='TensorBoard logging needs the "tensorboard" extra: pip install -e ".[tensorboard]"')
    from lightning.pytorch.loggers import TensorBoardLogger  # imports tensorboard, the optional extra
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    callback = HeadGeometryCallback(loss=nt_xent, probe=pairs(8, seed=1), every_n_train_steps=2)
    logger = TensorBoardLogger(tmp_path, name="tb", version=0)
    Trainer(devices=1, logger=logger, callbacks=[callback], **trainer_options(2)).fit(TinySimCLR(), loader())
    events = EventAccumulator(logger.log_dir)
    events.Reload()
    assert set(HEADLINE.values()) <= set(events.Tags()["scalars"])
    scalars = events.Scalars(LAMBDA_MIN)
    assert [e.step for e in scalars] == [0, 2]
    assert scalars[-1].value == pytest.approx(callback.last[LAMBDA_MIN], rel=1e-6)


def test_callback_needs_a_loss_and_a_probe():
    with pytest.raises(ValueError, match="loss="):
        HeadGeometryCallback(probe=pairs(4, seed=0))
    with pytest.raises(ValueError, match="probe="):
        HeadGeometryCallback(loss=nt_xent)


@pytest.mark.slow
def test_ddp_two_gloo_processes_measure_on_rank_zero_only(tmp_path):
    script = Path(__file__).resolve().parents[1] / "lightning_tiny.py"
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # rank 0 and the rank 1 it launched
        output, _ = proc.communicate()
        pytest.fail(f"DDP run hung (killed after 300 s):\n{output[-3000:]}")
    assert proc.returncode == 0, output[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    assert [r["last_step"] for r in ranks] == [3, None]  # rank 1 never measured
    assert ranks[0]["sync_world"] == 2 and isinstance(ranks[0]["sync_lambda_min"], float)
    assert ranks[1]["sync_lambda_min"] is None
    rows = geometry_rows(tmp_path / "csv" / "version_0" / "metrics.csv")
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3]


def test_a_pytorch_lightning_trainer_calls_it_too(tmp_path):
    """lightly's examples train with ``pytorch_lightning``, the pre-2.0 package name (lightning
    installs it); its Trainer calls callback hooks by name, so the same callback logs there."""
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch_lightning is not installed")

    class PlSimCLR(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.backbone, self.projection_head = TinySimCLR().backbone, TinySimCLR().projection_head

        def training_step(self, batch, batch_idx):
            x0, x1 = (self.projection_head(self.backbone(x).flatten(1)) for x in batch)
            return nt_xent(x0, x1)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    callback = HeadGeometryCallback(loss=nt_xent, probe=pairs(8, seed=1), every_n_train_steps=1)
    logger = pl.loggers.CSVLogger(tmp_path, name="csv", version=0)
    pl.Trainer(devices=1, logger=logger, callbacks=[callback], **trainer_options(1)).fit(PlSimCLR(), loader())
    assert [int(r["step"]) for r in geometry_rows(Path(logger.log_dir) / "metrics.csv")] == [0, 1]
