"""Quality report of the training stack: does each method learn?

For every method, pre-train its *small preset* (below) on the real CIFAR-10 train split, then
evaluate the frozen backbone on the CIFAR-10 test set with the standard SSL protocol (weighted
kNN, cosine, k = 200, T = 0.1; linear probe on standardised features), beside a randomly
initialised backbone of the same architecture evaluated the same way (``headgeom eval RUN
--random-baseline``). Everything goes through the public API (TrainConfig + train,
evaluate_run), so the figures are those a user gets.

    python benchmarks/quality.py --data-dir DIR [--methods simclr,byol] [--epochs 3] \
        [--out quality-runs] [--json quality.json]

DIR holds ``cifar-10-batches-bin`` or ``cifar-10-batches-py`` (``tools/make_cifar10.py`` writes
the binary layout from a JPEG copy of the real images, see docs/setup.md). Runs resume: a killed run
continues from its last checkpoint and finished runs/evaluations are not redone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# The small presets: CIFAR ResNet-18 at width 0.25 (feature dim 128), 32-px views, batch 256,
# SGD 0.06 (momentum 0.9, wd 5e-4, cosine), the method's own loss, augmentation recipe and
# hyper-parameters, with heads scaled to the 128-d backbone (the official heads are 2048-8192
# wide and would cost several times the backbone on a CPU). VICReg diverged (NaN at step 10)
# under SGD 0.06 without warm-up, so it takes solo-learn's CIFAR recipe: LARS, lr 0.3,
# wd 1e-4, warm-up (half an epoch here: the run is 3 epochs). DINO's first small preset
# (no BN in the head, no warm-up, teacher temperature 0.04 -> 0.07) collapsed to uniform outputs:
# every sample's head output was the same at initialisation, one SGD step made the student
# one-hot and the centring then flattened the teacher (loss ln 1024 from epoch 1 on, backbone
# below random; diagnosis in BENCHMARKS.md). It now takes DINOHead's use_bn option (BN in the
# head's hidden layers, so outputs differ per sample), DINO's linear lr warm-up (10 of 100
# epochs officially, 1 of 3 here) and main_dino.py's default teacher temperature 0.04 (constant).
SMALL_PRESETS: dict[str, dict[str, Any]] = {
    "simclr": {"head": "d-512-128:relu"},
    "simsiam": {"head": "d-512-512-512:relu:bn:last=bn:nobias", "predictor": "d-128-512:relu:bn"},
    "byol": {"head": "d-1024-128:relu:bn", "predictor": "d-1024-128:relu:bn"},
    "vicreg": {"head": "d-1024-1024-1024:relu:bn:nolastbias", "optimizer": "lars", "lr": 0.3,
               "weight_decay": 1e-4, "warmup_epochs": 0.5},
    "barlow_twins": {"head": "d-1024-1024-1024:relu:bn:nobias"},
    "dino": {"head": "d-512-512-1024:gelu:bn:dino=128", "warmup_epochs": 1.0,
             "method_options": {"n_local_crops": 2, "teacher_temp": 0.04, "teacher_temp_warmup": 0.0}},
}
METHODS = tuple(SMALL_PRESETS)


def small_preset(method: str, data_dir: str, epochs: int, seed: int = 0):
    """The TrainConfig of ``method``'s small preset."""
    from headgeom.train import TrainConfig

    if method not in SMALL_PRESETS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    settings = {"optimizer": "sgd", "lr": 0.06, "momentum": 0.9, "weight_decay": 5e-4, "schedule": "cosine",
                **SMALL_PRESETS[method]}
    return TrainConfig(method=method, backbone="resnet18", backbone_options={"width": 0.25},
                       data="cifar10", data_dir=data_dir, epochs=epochs, batch_size=256, seed=seed,
                       log_every=10, progress=True, **settings)


def run_method(method: str, data_dir: str, epochs: int, out: Path, seed: int = 0) -> dict[str, Any]:
    """Train (or resume) and evaluate one method; returns the evaluation (also in RUN/eval.json)."""
    from headgeom.eval.evaluate import EvalConfig, evaluate_run
    from headgeom.io import atomic_write_json
    from headgeom.train import train

    run = out / method
    t0 = time.perf_counter()
    done_path = run / "done.json"
    if not (done_path.exists() and json.loads(done_path.read_text()).get("complete")):
        train(small_preset(method, data_dir, epochs, seed), run, resume=(run / "config.json").exists())
    t_train = time.perf_counter() - t0
    eval_path = run / "eval.json"
    if eval_path.exists():
        return json.loads(eval_path.read_text())
    t1 = time.perf_counter()
    cfg = EvalConfig(rotation=False, stats_max=10_000, points=("z",))  # the backbone: what the quality question is about
    res = evaluate_run(run, data_dir=data_dir, config=cfg, device="cpu", random_baseline=True,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    res["timing"] = {"train_s_this_call": t_train, "eval_s": time.perf_counter() - t1}
    atomic_write_json(eval_path, res)
    return res


def row(method: str, res: dict[str, Any]) -> dict[str, Any]:
    """kNN and linear top-1 (%) at the backbone output z, trained and random-init."""
    def at_z(r: dict[str, Any]) -> tuple[float, float]:
        z = r["points"]["z"]
        k0 = str(r["protocol"]["k"][0])
        return 100 * z["knn_top1"][k0], 100 * z["linear"]["test_top1"]

    knn, lin = at_z(res["trained"])
    rknn, rlin = at_z(res["random_init"])
    done = json.loads((Path(res["run"]) / "done.json").read_text())
    return {"method": method, "step": res["step"], "epoch": res["epoch"], "knn": knn, "linear": lin,
            "random_knn": rknn, "random_linear": rlin, "images_per_s": done.get("images_per_s"),
            "n_test": res["trained"]["n_test"]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| method | epochs | kNN top-1 (trained / random) | linear top-1 (trained / random) | train images/s |",
             "|---|---|---|---|---|"]
    for r in rows:
        wall = f"{r['images_per_s']:.0f}" if r.get("images_per_s") else "—"
        lines.append(f"| {r['method']} | {r['epoch']} | {r['knn']:.2f} / {r['random_knn']:.2f} "
                     f"({r['knn'] - r['random_knn']:+.2f}) | {r['linear']:.2f} / {r['random_linear']:.2f} "
                     f"({r['linear'] - r['random_linear']:+.2f}) | {wall} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="folder with the CIFAR-10 official layout")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default all six)")
    p.add_argument("--epochs", type=int, default=3, help="pre-training epochs (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="quality-runs", help="folder of the runs (default quality-runs)")
    p.add_argument("--json", default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    from headgeom.io import atomic_write_json
    from headgeom.threads import torch_threads  # noqa: F401  (torch's thread count stays the default)

    out = Path(args.out)
    rows = []
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        res = run_method(method, args.data_dir, args.epochs, out, args.seed)
        rows.append(row(method, res))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print("\n" + table(rows))
    if args.json:
        atomic_write_json(args.json, {"epochs": args.epochs, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
