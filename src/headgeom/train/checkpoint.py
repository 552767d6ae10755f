"""Training checkpoints: written atomically, read without unpickling code.

A checkpoint is a ``dict`` of tensors and plain containers (str, int, float, bool, None, lists,
tuples, dicts) saved with ``torch.save``; :func:`load_checkpoint` reads it with headgeom's one
checkpoint reader (:func:`headgeom.runs.safe_load.safe_load`), which refuses anything else. Contents (``FORMAT`` version 1):

    format, version        "headgeom.train.checkpoint", 1
    step, epoch            optimizer updates done; epochs completed (floor(step / steps_per_epoch))
    method                 method.state_dict() (EMA targets, DINO centre included)
    optimizer              optimizer.state_dict()
    data_generator         uint8 state of the data-order generator at the start of epoch ``epoch``
    aug_generator          uint8 state of the augmentation generator after step ``step``
    aug_device             "cpu" or "cuda": the generator's device (states differ between the two)
    torch_rng, cuda_rng    torch CPU RNG state; CUDA RNG state of the current device or None
    config                 TrainConfig.to_dict() of the run that wrote it
    tracker                the tracker's state_dict() (tensors/plain containers) or None
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import Any

import torch

from headgeom.runs.safe_load import CheckpointFormatError, UnsafeCheckpointError, safe_load
from headgeom.io import atomic_write_bytes
from headgeom.runs.checkpoint_format import CHECKPOINT_FORMAT, CHECKPOINT_VERSION

__all__ = ["FORMAT", "VERSION", "CheckpointError", "CheckpointWriter", "load_checkpoint", "save_checkpoint",
           "snapshot"]

FORMAT, VERSION = CHECKPOINT_FORMAT, CHECKPOINT_VERSION
_REQUIRED = ("step", "epoch", "method", "optimizer", "data_generator", "aug_generator", "torch_rng",
             "config")


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be read or is not a headgeom training checkpoint."""


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Write ``state`` (the keys of the module docstring) to ``path`` atomically: a crash leaves the
    previous file untouched (temporary file in the same folder, fsync, os.replace)."""
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise ValueError(f"checkpoint state lacks {missing}; it needs {list(_REQUIRED)}")
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "version": VERSION, **state}, buf)
    return atomic_write_bytes(path, buf.getvalue())


def snapshot(obj: Any) -> Any:
    """A CPU copy of every tensor in a nest of dicts/lists/tuples (training may go on mutating
    the originals in place while the copy is written)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: snapshot(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(snapshot(v) for v in obj)
    return obj


class CheckpointWriter:
    """Writes checkpoints on one background thread, so the device keeps training meanwhile.

    ``save`` snapshots the state to CPU at once, waits for the previous write, and starts the
    next; ``wait`` joins the pending write and re-raises its error. Each file is still written
    atomically by :func:`save_checkpoint`, so a crash leaves the previous one intact.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def save(self, path: Path, state: dict[str, Any], copies: tuple[Path, ...] = ()) -> None:
        """Write ``state`` to ``path``, then the same bytes to each of ``copies``."""
        state = snapshot(state)
        self.wait()

        def work() -> None:
            try:
                save_checkpoint(path, state)
                for extra in copies:
                    atomic_write_bytes(extra, Path(path).read_bytes())
            except OSError as err:  # a full disk: name the checkpoint (a write to the temporary file names none)
                self._error = err if err.filename else OSError(err.errno, err.strerror, str(path))
            except BaseException as err:  # handed to the training thread by wait()
                self._error = err

        self._thread = threading.Thread(target=work, name="headgeom-checkpoint", daemon=False)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            err, self._error = self._error, None
            raise err


def load_checkpoint(path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
                    ) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` through headgeom's one checkpoint reader
    (:func:`headgeom.runs.safe_load.safe_load`: no pickled code runs), with its tensors on ``map_location``.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: an empty, truncated or damaged file, a file of another program, objects
            that would need unpickling code, or another format version; the message is the one every
            command gives for that file, and says what to do.
    """
    try:
        loaded = safe_load(path)
    except (CheckpointFormatError, UnsafeCheckpointError) as err:
        raise CheckpointError(str(err)) from err
    obj = loaded.obj
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(f"{path} is not a headgeom training checkpoint (format {got!r}, expected "
                              f"{FORMAT!r}); point --out at a run directory written by `headgeom train`")
    if loaded.stand_ins:
        raise CheckpointError(f"{path} holds pickled references ({', '.join(loaded.stand_ins)}) that a headgeom "
                              f"training checkpoint never holds; it was not written by `headgeom train`")
    if obj.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {obj.get('version')!r}; this headgeom "
                              f"reads version {VERSION}")
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}; it is incomplete (expected {list(_REQUIRED)})")
    return _to(obj, torch.device(map_location)) if torch.device(map_location).type != "cpu" else obj


def _to(obj: Any, device: torch.device) -> Any:
    """Every tensor of a nest of dicts/lists/tuples moved to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj
