"""One message for a damaged checkpoint, whichever command reads it: `train --resume`,
`eval --checkpoint`, `checkpoint` and `analyze` x a missing, empty, random, truncated file and
pickles that would run code -> exit 2, one line on stderr, the same words, no warning, nothing run."""
from __future__ import annotations

import os
import pickle
import shutil
import warnings

import pytest
import torch

from headgeom.cli import main
from headgeom.runs.folder import missing_checkpoint_message

pytestmark = pytest.mark.usefixtures("one_thread")


class _RunsCode:
    """Unpickling this runs a shell command that leaves a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))



def _damage(kind, last, marker):
    good = last.read_bytes()
    if kind == "missing":
        last.unlink()
    elif kind == "empty":
        last.write_bytes(b"")
    elif kind == "random":
        last.write_bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0),
                                       dtype=torch.uint8).numpy().tobytes())
    elif kind == "truncated":
        last.write_bytes(good[: len(good) // 2])
    elif kind == "pickle":  # a bare pickle
        last.write_bytes(pickle.dumps({"method": _RunsCode(marker)}, protocol=2))
    elif kind == "torch_save":  # what torch.save writes for an object that runs code when loaded
        torch.save({"format": "headgeom.train.checkpoint", "method": _RunsCode(marker)}, last)


def _argv(command, run, last, tmp_path):
    return {
        "train": ["train", "--out", str(run), "--resume"],
        "eval": ["eval", str(run), "--checkpoint", str(last), "--k", "3", "--no-linear", "--no-rotation",
                 "--device", "cpu", "--quiet", "--json", str(tmp_path / "eval.json")],
        "checkpoint": ["checkpoint", str(last)],
        "analyze": ["analyze", str(last), "--images", "2", "--steps", "2", "--families", "hue", "--boot", "10",
                    "--no-tangents", "--no-controls", "--device", "cpu", "--quiet", "--out", str(tmp_path / "an")],
    }[command]


@pytest.mark.parametrize("kind", ["missing", "empty", "random", "truncated", "pickle", "torch_save"])
def test_every_command_gives_the_same_one_line(kind, one_step_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(one_step_run, run)
    last, marker = run / "checkpoints" / "last.pt", tmp_path / "code-ran"
    _damage(kind, last, marker)
    metrics = (run / "metrics.jsonl").read_bytes()
    said = {}
    for command in ("checkpoint", "analyze", "eval", "train"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = main(_argv(command, run, last, tmp_path))
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (command, err)
        prefix = f"headgeom {command}: error: "
        assert lines[0].startswith(prefix), lines[0]
        said[command] = lines[0][len(prefix):]
        leaked = [w for w in caught if not issubclass(w.category, DeprecationWarning)]
        assert not leaked, (command, [str(w.message) for w in leaked])
    assert not marker.exists()
    assert (run / "metrics.jsonl").read_bytes() == metrics  # train --resume touched nothing
    if kind == "missing":  # train --resume says there is nothing to resume, in the same words
        assert all(missing_checkpoint_message(last) in msg for msg in said.values()), said
    else:
        assert len(set(said.values())) == 1, said
        assert str(last) in said["checkpoint"]
