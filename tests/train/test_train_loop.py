"""headgeom.train.loop: bit-identical resume, atomic checkpoints, non-finite stop, run records
(with the head/backbone gradient norms each record's step applied).

A tiny protocol-following method (conv backbone with BatchNorm, MLP projector with dropout so the
torch RNG matters, an EMA copy updated in on_step_end so buffers matter) trains on 64 ``shapes``
images at 16 px, batch 16: 4 steps per epoch, a few seconds per file on 2 cores.
"""
from __future__ import annotations

import json
import math
import os

import pytest
import torch
from torch import nn

from headgeom.augment.random_ops import Compose, RandomHorizontalFlip, RandomResizedCrop
from headgeom.augment.recipes import Recipe
from headgeom.train import CheckpointError, NonFiniteLossError, TrainConfig, load_checkpoint, train
from headgeom.train.checkpoint import CheckpointWriter, save_checkpoint
from tiny_models import train_config as cfg  # shared with the DINO freeze, DDP and grad-norm tests


class TinyMethod(nn.Module):
    """Follows docs/design.md#method-interface: forward(views) -> {"loss", "z", "logs"}, recipe, param_groups,
    on_step_end; ``nan_at`` makes the loss NaN from that 0-based step on."""

    name = "tiny"

    def __init__(self, nan_at: int | None = None, separable: bool = False) -> None:
        super().__init__()
        # separable=True: no BatchNorm, no dropout, so the loss is a plain mean over samples
        self.backbone = nn.Sequential(nn.Conv2d(3, 6, 3, stride=2),
                                      nn.Identity() if separable else nn.BatchNorm2d(6), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projector = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.0 if separable else 0.2),
                                       nn.Linear(16, 8))
        self.skip = nn.Linear(6, 8)
        self.target = nn.Linear(6, 8)  # EMA copy of ``skip``: a stateful part, as BYOL's target
        self.target.requires_grad_(False)
        self.predictor = None
        self.nan_at = nan_at
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))

    def forward(self, views):
        z = [self.backbone(v) for v in views]
        p = [self.projector(zi) + self.skip(zi) for zi in z]
        t = [self.target(zi).detach() for zi in z]
        loss = -(nn.functional.cosine_similarity(p[0], t[1]).mean()
                 + nn.functional.cosine_similarity(p[1], t[0]).mean()) / 2
        loss = loss + 0.1 * (p[0] - p[1]).pow(2).mean()
        if self.nan_at is not None and int(self.updates) >= self.nan_at:
            loss = loss * float("nan")
        return {"loss": loss, "z": z, "logs": {"p_norm": float(p[0].detach().norm(dim=1).mean())}}

    @torch.no_grad()
    def on_step_end(self, step: int, total_steps: int) -> None:
        m = 0.9 + 0.09 * step / total_steps
        self.target.weight.mul_(m).add_(self.skip.weight, alpha=1 - m)
        self.updates += 1

    def head_parameters(self):
        """The projector and the skip map (``target`` is an EMA copy: no gradient, not trained)."""
        yield from (*self.projector.parameters(), *self.skip.parameters())

    def backbone_parameters(self):
        yield from self.backbone.parameters()

    def recipe(self, size: int) -> Recipe:
        view = Compose((RandomResizedCrop(size, scale=(0.3, 1.0)), RandomHorizontalFlip(0.5)))
        return Recipe("tiny", (view, view))

    def param_groups(self, weight_decay: float):
        params = [p for p in self.parameters() if p.requires_grad]
        return [{"name": "decay", "params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
                {"name": "no_decay", "params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def tiny(config: TrainConfig) -> TinyMethod:
    return TinyMethod(**config.method_options)


def metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("optimizer", ["sgd", "lars", "adamw"])
def test_stopped_and_resumed_run_is_bit_identical(tmp_path, optimizer):
    full, split = tmp_path / "full", tmp_path / "split"
    train(cfg(optimizer=optimizer), full, build_method=tiny)
    # stop at an epoch boundary (4), then mid-epoch (6), then finish (12): every resume path
    train(cfg(optimizer=optimizer, max_steps=4), split, build_method=tiny)
    train(cfg(optimizer=optimizer, max_steps=6), split, resume=True, build_method=tiny)
    done = train(cfg(optimizer=optimizer), split, resume=True, build_method=tiny)
    assert done["step"] == 12 and done["complete"]
    a, b = load_checkpoint(full / "checkpoints" / "last.pt"), load_checkpoint(split / "checkpoints" / "last.pt")
    assert_same_state(a["method"], b["method"])  # parameters and buffers (BN stats, EMA, counter)
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys() and all(assert_same_state(sa[k], sb[k]) is None for k in sa)
    assert torch.equal(a["aug_generator"], b["aug_generator"])
    assert torch.equal(a["data_generator"], b["data_generator"])
    assert metrics(full) == metrics(split)  # losses equal as floats, no duplicated lines
    assert [r["step"] for r in metrics(split)] == list(range(1, 13))
    assert all(r["grad_norm_head"] > 0 and r["grad_norm_backbone"] > 0 for r in metrics(split))
    again = train(cfg(optimizer=optimizer), split, resume=True, build_method=tiny)  # nothing left to do
    assert again["step"] == 12 and again["steps_this_session"] == 0
    assert again["final_loss"] == done["final_loss"] and metrics(full) == metrics(split)


def test_resume_against_changed_settings_or_fresh_run_into_used_dir_fails(tmp_path):
    train(cfg(max_steps=2), tmp_path, build_method=tiny)
    with pytest.raises(ValueError, match=r"lr: stored 0.05, given 0.1"):
        train(cfg(lr=0.1), tmp_path, resume=True, build_method=tiny)
    with pytest.raises(FileExistsError, match="--resume"):
        train(cfg(), tmp_path, build_method=tiny)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        train(cfg(), tmp_path / "empty", resume=True, build_method=tiny)


def test_resume_from_another_device_type_reseeds_augmentation_with_a_warning(tmp_path):
    train(cfg(max_steps=2), tmp_path, build_method=tiny)
    last = tmp_path / "checkpoints" / "last.pt"
    ck = load_checkpoint(last)
    assert ck["aug_device"] == "cpu"
    # what a GPU run leaves: a 16-byte Philox state that a CPU generator cannot take
    save_checkpoint(last, {**ck, "aug_device": "cuda", "aug_generator": torch.zeros(16, dtype=torch.uint8)})
    with pytest.warns(UserWarning, match="resuming a cuda run on cpu: the augmentation generator is reseeded"):
        done = train(cfg(max_steps=4), tmp_path, resume=True, build_method=tiny)
    assert done["step"] == 4 and math.isfinite(done["final_loss"])


def test_run_directory_records(tmp_path):
    done = train(cfg(epochs=2, log_every=3, keep_every_epochs=1), tmp_path, build_method=tiny)
    lines = metrics(tmp_path)
    assert [r["step"] for r in lines] == [3, 6, 8]  # every 3 steps and the last
    for r in lines:
        assert {"step", "epoch", "loss", "lr", "p_norm"} <= r.keys() and isinstance(r["loss"], float)
    assert lines[0]["epoch"] == 3 / 4
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["config"]["lr"] == 0.05 and meta["steps_per_epoch"] == 4 and meta["total_steps"] == 8
    assert meta["git_revision"] and "torch" in meta["versions"]
    assert TrainConfig.from_dict(meta["config"]) == cfg(epochs=2, log_every=3, keep_every_epochs=1)
    assert json.loads((tmp_path / "done.json").read_text())["step"] == 8 == done["step"]
    assert done["complete"] and done["final_loss"] == lines[-1]["loss"]
    for e in (1, 2):
        assert load_checkpoint(tmp_path / "checkpoints" / f"epoch_{e:04d}.pt")["step"] == 4 * e


def norm_of_grads(method: nn.Module, prefixes: tuple[str, ...]) -> float:
    """sqrt of the sum of squared gradient entries of the parameters named with ``prefixes``, in float64,
    written out here apart from headgeom.train.grad_norms."""
    total = 0.0
    for name, p in method.named_parameters():
        if name.startswith(prefixes) and p.grad is not None:
            total += float((p.grad.double() ** 2).sum())
    return math.sqrt(total)


def test_logged_gradient_norms_are_those_of_the_step_and_ride_on_every_record(tmp_path):
    built = []

    def build(config):
        built.append(tiny(config))
        return built[-1]

    c = cfg(epochs=2, log_every=3, track_every=2, probe_size=4)
    train(c, tmp_path, build_method=build, tracker=lambda step, method, probe: {"probe": 1.0})
    lines = metrics(tmp_path)
    # a line at every logging step (3, 6, the last 8) and tracking step (0, 2, 4, 6, 8); each line of a
    # trained step carries the norms, the initialisation line (step 0: no gradient yet) does not
    assert [r["step"] for r in lines] == [0, 2, 3, 4, 6, 8]
    assert all(("grad_norm_head" in r) == (r["step"] > 0) == ("grad_norm_backbone" in r) for r in lines)
    # after train returns, .grad holds the last step's gradient (zeroed only before each backward)
    (method,) = built
    assert method.target.weight.grad is None  # the EMA copy has no gradient and is in neither group
    last = lines[-1]
    assert last["grad_norm_head"] == pytest.approx(norm_of_grads(method, ("projector.", "skip.")), rel=1e-12)
    assert last["grad_norm_backbone"] == pytest.approx(norm_of_grads(method, ("backbone.",)), rel=1e-12)
    assert len({r["grad_norm_head"] for r in lines[1:]}) == 5  # each step's own gradient


def test_a_method_without_head_and_backbone_parameters_records_no_gradient_norms(tmp_path):
    class Bare(TinyMethod):
        head_parameters = backbone_parameters = None

    train(cfg(max_steps=2), tmp_path, build_method=lambda config: Bare())
    assert all("grad_norm_head" not in r and "loss" in r for r in metrics(tmp_path))


def test_schedule_reaches_the_optimizer(tmp_path):
    train(cfg(epochs=2, warmup_epochs=0.5, final_lr=0.001), tmp_path, build_method=tiny)
    lrs = [r["lr"] for r in metrics(tmp_path)]
    expect = [0.05 * (s + 1) / 2 if s < 2 else 0.001 + (0.05 - 0.001) * 0.5 * (1 + math.cos(math.pi * (s - 2) / 6))
              for s in range(8)]
    assert lrs == pytest.approx(expect, rel=1e-12)


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss nan at step 6 .*step 5\) is kept"):
        train(cfg(method_options={"nan_at": 5}, checkpoint_every=1), tmp_path, build_method=tiny)
    ck = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert ck["step"] == 5 and all(torch.isfinite(v).all() for v in ck["method"].values() if v.is_floating_point())
    stopped = json.loads((tmp_path / "stopped.json").read_text())
    assert stopped["step"] == 6 and stopped["checkpoint_step"] == 5 and stopped["loss"] is None
    assert not (tmp_path / "done.json").exists()
    assert max(r["step"] for r in metrics(tmp_path)) == 5


def test_non_finite_loss_between_records_is_caught_at_the_next_record(tmp_path):
    # log every 3 steps, checkpoint per epoch (4 steps): NaN from step 6 on is seen at step 6
    with pytest.raises(NonFiniteLossError, match=r"at step 6 .*step 4\) is kept"):
        train(cfg(method_options={"nan_at": 4}, log_every=3), tmp_path, build_method=tiny)
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["step"] == 4
    assert [r["step"] for r in metrics(tmp_path)] == [3]


def test_exploding_lr_stops_with_clear_message(tmp_path):
    with pytest.raises(NonFiniteLossError, match="non-finite") as err:
        train(cfg(lr=1e30, warmup_epochs=0.0, checkpoint_every=1), tmp_path, build_method=tiny)
    assert "Lower --lr" in str(err.value)
    last = tmp_path / "checkpoints" / "last.pt"
    if last.exists():  # whatever was kept holds finite parameters only
        assert all(torch.isfinite(v).all() for v in load_checkpoint(last)["method"].values()
                   if v.is_floating_point())


def test_truncated_or_foreign_checkpoint_is_a_clear_error(tmp_path):
    train(cfg(max_steps=4), tmp_path, build_method=tiny)
    last = tmp_path / "checkpoints" / "last.pt"
    bad = tmp_path / "bad.pt"
    bad.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="is truncated"):
        load_checkpoint(bad)
    torch.save({"weights": torch.ones(2)}, bad)
    with pytest.raises(CheckpointError, match="not a headgeom training checkpoint"):
        load_checkpoint(bad)
    torch.save({"format": "headgeom.train.checkpoint", "obj": TrainConfig(method="x")}, bad)
    with pytest.raises(CheckpointError, match="could run code, so nothing was executed"):
        load_checkpoint(bad)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")
    # resuming from a truncated last.pt fails clearly instead of training from garbage
    good = last.read_bytes()
    last.write_bytes(good[:1000])
    with pytest.raises(CheckpointError, match="truncated"):
        train(cfg(), tmp_path, resume=True, build_method=tiny)
    last.write_bytes(good)


def test_interrupted_checkpoint_write_leaves_previous_intact(tmp_path, monkeypatch):
    train(cfg(max_steps=4), tmp_path, build_method=tiny)
    last = tmp_path / "checkpoints" / "last.pt"
    before = last.read_bytes()
    state = load_checkpoint(last)

    def killed(src, dst):
        raise KeyboardInterrupt("killed during the write")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(last, {**state, "step": 99})
    monkeypatch.undo()
    assert last.read_bytes() == before and load_checkpoint(last)["step"] == 4
    assert sorted(p.name for p in last.parent.iterdir()) == ["last.pt"]  # no temporary left


class ChangeTracker:
    """Stateful like GeometryTracker's update sizes: change of skip.weight since the last call."""

    def __init__(self) -> None:
        self.prev: torch.Tensor | None = None

    def __call__(self, step, method, probe):
        w = method.skip.weight.detach().clone()
        out = {} if self.prev is None else {"change": float((w - self.prev).norm())}
        self.prev = w
        return out

    def state_dict(self):
        return {"prev": self.prev}

    def load_state_dict(self, state):
        self.prev = state["prev"]


def test_stateful_tracker_series_continues_across_resume(tmp_path):
    c = cfg(epochs=2, track_every=3, probe_size=4)
    train(c, tmp_path / "full", tracker=ChangeTracker(), build_method=tiny)
    train(TrainConfig(**{**c.to_dict(), "max_steps": 5}), tmp_path / "split", tracker=ChangeTracker(),
          build_method=tiny)
    train(c, tmp_path / "split", tracker=ChangeTracker(), build_method=tiny, resume=True)
    full = metrics(tmp_path / "full")
    assert [r["step"] for r in full if "change" in r] == [3, 6]
    assert metrics(tmp_path / "split") == full


def test_background_writer_snapshots_state_and_reports_errors(tmp_path):
    train(cfg(max_steps=1), tmp_path, build_method=tiny)
    state = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    w = state["method"]["skip.weight"]
    writer = CheckpointWriter()
    target, copy = tmp_path / "w" / "a.pt", tmp_path / "w" / "epoch_0001.pt"
    writer.save(target, state, (copy,))
    expect = w.clone()
    w.add_(1.0)  # training goes on mutating the live tensors while the write runs
    writer.wait()
    for path in (target, copy):
        assert torch.equal(load_checkpoint(path)["method"]["skip.weight"], expect)
    writer.save(tmp_path / "w" / "b.pt", {"step": 1})  # incomplete state: fails on the thread
    with pytest.raises(ValueError, match="checkpoint state lacks"):
        writer.wait()
    writer.wait()  # the error is reported once


def test_tracker_is_called_on_schedule_and_does_not_move_the_run(tmp_path):
    calls, kill_at = [], [3]

    def tracker(step, method, probe):
        if step in kill_at:
            kill_at.clear()
            raise KeyboardInterrupt("killed")
        calls.append((step, len(probe), tuple(probe[0].shape)))
        torch.rand(5)  # draws from the global RNG: must not change the run (fork_rng)
        with torch.no_grad():
            out = method.backbone.eval()(probe[0])
        return {"probe_norm": float(out.norm()), "nan_metric": float("nan")}

    # a run killed before its first checkpoint: resume refuses (metrics kept), resume_or_start starts
    # it again from step 0 without duplicated lines
    with pytest.raises(KeyboardInterrupt):
        train(cfg(epochs=2, track_every=3, probe_size=8), tmp_path / "a", tracker=tracker, build_method=tiny)
    assert [r["step"] for r in metrics(tmp_path / "a")] == [0, 1, 2]
    with pytest.raises(ValueError, match="nothing to resume"):
        train(cfg(epochs=2, track_every=3, probe_size=8), tmp_path / "a", tracker=tracker, build_method=tiny,
              resume=True)
    assert [r["step"] for r in metrics(tmp_path / "a")] == [0, 1, 2]
    calls.clear()
    train(cfg(epochs=2, track_every=3, probe_size=8), tmp_path / "a", tracker=tracker, build_method=tiny,
          resume=True, resume_or_start=True)
    train(cfg(epochs=2), tmp_path / "b", build_method=tiny)
    assert [c[0] for c in calls] == [0, 3, 6] and calls[0][1:] == (2, (8, 3, 16, 16))
    assert [r["step"] for r in metrics(tmp_path / "a")] == list(range(9))
    tracked = {r["step"]: r for r in metrics(tmp_path / "a")}
    assert "probe_norm" in tracked[0] and "loss" not in tracked[0] and tracked[3]["nan_metric"] is None
    a = load_checkpoint(tmp_path / "a" / "checkpoints" / "last.pt")["method"]
    b = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")["method"]
    assert_same_state(a, b)
