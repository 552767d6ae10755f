"""One process of a 2-process ``headgeom train``, started the way ``srun -n 2`` starts it.

    python tests/slurm_ddp_worker.py RUN_DIR WEIGHTS_DIR

The SLURM variables (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_NODELIST, the
job id) come from srun or from tests/train/test_train_ddp_slurm.py; there is no torchrun. It runs the
command line ``headgeom train`` on CPU (gloo) and then saves this rank's final weights to
WEIGHTS_DIR/rank<r>.pt, so the test can compare the ranks; the model is caught by wrapping the
loop's builder (the only way to see a rank's weights without it writing files of its own).
"""
import os
import sys
from pathlib import Path

import torch

import headgeom.train.loop as loop
from headgeom.cli import main

TRAIN = ["train", "--method", "simclr", "--backbone", "resnet18", "--width", "0.0625", "--head", "d-16-8:bn",
         "--data", "shapes", "--data-option", "n=64", "--data-option", "size=16", "--batch-size", "16",
         "--epochs", "2", "--optimizer", "sgd", "--lr", "0.1", "--device", "cpu", "--quiet"]

built = []
_build = loop.build_method_from_config


def _recording(config):
    built.append(_build(config))
    return built[-1]


if __name__ == "__main__":
    run_dir, weights = Path(sys.argv[1]), Path(sys.argv[2])
    torch.set_num_threads(1)
    loop.build_method_from_config = _recording
    code = main([*TRAIN, "--out", str(run_dir)])
    rank = int(os.environ["SLURM_PROCID"])
    weights.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().clone() for k, v in built[0].state_dict().items()}, weights / f"rank{rank}.pt")
    sys.exit(code)
