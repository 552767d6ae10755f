"""The trained-model store's folders, keys and lock (headgeom.runs.store); the training through it is
tested in tests/train/test_train_cells_store.py."""
from __future__ import annotations

import json
import threading

import pytest

from headgeom.runs.store import DIVERGED, ModelStore, lineage_key, model_key, steps_name
from headgeom.train import TrainConfig

BASE = TrainConfig(method="simclr", backbone="resnet18", head="d-16-8", data="shapes", device="cpu", seed=0)
TRACKING = {"readings": ["ambient"], "rel_floor": 1e-10, "block_samples": 8, "power_iterations": None}


def _key(tracking=None, **changes) -> str:
    return model_key(TrainConfig(**{**BASE.to_dict(), **changes}).to_dict(), tracking)


def test_the_key_covers_what_changes_the_model_or_what_a_cell_reads():
    key = _key()
    assert key == _key() and key.startswith("simclr-resnet18-seed0-")
    # where it logs, its progress bar, extra checkpoints, max_steps: one model (max_steps: one trajectory)
    assert _key(logger="tensorboard", progress=True, checkpoint_every=3, keep_every_epochs=1, max_steps=7) == key
    for change in ({"seed": 1}, {"lr": 0.01}, {"head": "d-16-4"}, {"batch_size": 64}, {"epochs": 2},
                   {"data_options": {"n": 64}}, {"device": "auto"}, {"log_every": 2}):
        assert _key(**change) != key, change
    # a tracker's settings matter only with a tracker: then they are part of what the cell reads
    assert _key(track_every=5, probe_size=16) == key
    tracked = _key(TRACKING)
    assert tracked != key and _key(TRACKING, track_every=5) != tracked and _key(TRACKING, probe_size=16) != tracked
    assert _key({**TRACKING, "readings": ["tangential"]}) != tracked
    # the lineage groups a trajectory's cells whatever they track or where they stop
    assert lineage_key({**BASE.to_dict(), "max_steps": 3}) == lineage_key(BASE.to_dict())
    assert lineage_key({**BASE.to_dict(), "seed": 2}) != lineage_key(BASE.to_dict())


def test_stops_and_the_base_a_longer_stop_continues_from(tmp_path):
    store = ModelStore(tmp_path)
    assert steps_name(100) == "steps-000100" and steps_name(None) == "steps-all"
    for steps, files in ((2, ("done.json", "checkpoints/last.pt")), (5, (DIVERGED, "checkpoints/last.pt")),
                         (7, ("config.json",)), (9, ("done.json",))):  # 7: a killed attempt; 9: no checkpoint
        for name in files:
            path = store.folder("k", steps) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}" if name != DIVERGED else json.dumps({"message": "nan at step 4"}))
    assert store.stops("k") == [2, 5, 9]
    assert store.base("k", 2) is None and store.base("k", 3) == store.folder("k", 2)
    assert store.base("k", 6) == store.folder("k", 5)  # a diverged stop continues to the same divergence
    assert store.base("k", None) == store.folder("k", 5)  # 9 has nothing to continue from
    assert store.diverged(store.folder("k", 5)) == "nan at step 4" and store.diverged(store.folder("k", 2)) is None


def test_a_continued_stop_copies_the_run_but_not_its_loggers(tmp_path):
    base, target = tmp_path / "k" / "steps-000002", tmp_path / "k" / "steps-000004"
    for name in ("config.json", "metrics.jsonl", "checkpoints/last.pt", "done.json", "tensorboard/events", "loggers.json"):
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(name)
    ModelStore.continue_from(base, target)
    copied = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert copied == ["checkpoints/last.pt", "config.json", "metrics.jsonl"]
    assert (target / "config.json").read_text() == "config.json"
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []  # no copy left aside


def test_a_second_writer_waits_for_the_first_and_a_foreign_key_form_is_refused(tmp_path):
    store = ModelStore(tmp_path)
    form = ModelStore.key_form(BASE.to_dict())
    waiting, order = threading.Event(), []

    def second() -> None:
        with store.hold("k", form, note=lambda msg: waiting.set()):
            order.append("second")

    with store.hold("k", form) as folder:
        assert json.loads((folder / "key.json").read_text()) == form
        thread = threading.Thread(target=second)
        thread.start()
        assert waiting.wait(timeout=60)  # it told us it waits (it blocks on the lock, not on a timer)
        order.append("first")
    thread.join(timeout=60)
    assert order == ["first", "second"]
    with pytest.raises(ValueError, match="holds another training config under the same key"):
        with store.hold("k", ModelStore.key_form({**BASE.to_dict(), "seed": 3})):
            pass
