"""A trained run read back: ``load_trained(RUN) -> TrainedRun``, the one way every command and
experiment turns a ``headgeom train`` run folder (or its ``checkpoints/last.pt``) into models.

A run folder holds ``config.json`` (``{"config": TrainConfig.to_dict(), ...}``) and
``checkpoints/last.pt`` (``{"format": "headgeom.train.checkpoint", "version": 1, "method":
state_dict, "config": ..., "step", "epoch", ...}``), read through
:func:`headgeom.runs.safe_load.safe_load` (no pickled code runs). The method is rebuilt from the
stored settings with :func:`headgeom.methods.build_method`, as training built it, and filled.

The run layer sits beneath ``headgeom.train``, so the settings are read from the stored mapping
into :class:`RunSettings` (the fields that say what was trained on what), not into TrainConfig.
Those fields are declared once, here: ``headgeom.train.TrainConfig`` extends RunSettings with how
the run trained, so a field and its default cannot differ between the two.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from headgeom.runs.safe_load import safe_load
from headgeom.data import DATASET_STATS, ImageDataset, dataset_stats, load_dataset
from headgeom.methods import build_method
from headgeom.rng import seeded

from .checkpoint_format import CHECKPOINT_FORMAT, CHECKPOINT_VERSIONS
from .folder import missing_checkpoint_message

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSIONS", "RunSettings", "TrainedRun", "TrainedRunError",
           "build_trained", "load_trained", "read_run_config"]



class TrainedRunError(ValueError):
    """A run folder or checkpoint that does not hold a complete headgeom training run."""


@dataclass(frozen=True)
class RunSettings:
    """What a run trained (model) on what (data): the fields of its stored TrainConfig that
    :func:`load_trained` needs, declared here once (``headgeom.train.TrainConfig`` extends this class
    with how the run trained). The defaults fill records written before a field existed.

    Model: ``method`` (headgeom.methods name), ``backbone`` (headgeom.backbones name) with
    ``backbone_options`` (e.g. ``{"width": 0.25}``), ``head``/``predictor`` (head spec string or
    preset, None = the method's default), ``pseudo_collapse`` (α: projector Linear weights ×α at
    init, the paper uses 0.1), ``collapse`` (the induced collapse's depth: a fixed offset after the projector,
    sized at step 0, :mod:`headgeom.train.collapse`), ``method_options`` (temperature, λ, EMA momentum, ...), ``seed``
    (the run's seed: its initialisation, data order and augmentations).

    Data: ``data`` (headgeom.data name), ``data_dir``, ``data_options`` (e.g. shapes ``{"n": 512}``),
    ``image_size`` (augmented view side; None = the dataset's), ``normalize`` (append the
    dataset's mean/std normalisation when the method's recipe has none)."""

    method: str
    backbone: str = "resnet18"
    backbone_options: dict[str, Any] = field(default_factory=dict)
    head: str | None = None
    predictor: str | None = None
    pseudo_collapse: float | None = None
    collapse: float | None = None
    method_options: dict[str, Any] = field(default_factory=dict)
    data: str = "shapes"
    data_dir: str | None = None
    data_options: dict[str, Any] = field(default_factory=dict)
    image_size: int | None = None
    normalize: bool = True
    seed: int = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RunSettings:
        """From a stored TrainConfig mapping (other fields of it are ignored here)."""
        missing = [k for k in ("method",) if k not in config]
        if missing:
            raise TrainedRunError(f"stored run config lacks {missing}; it is not a headgeom training config "
                                  f"(keys: {sorted(config)})")
        names = cls.__dataclass_fields__
        kw = {k: config[k] for k in names if k in config}
        for k in ("backbone_options", "method_options", "data_options"):
            if k in kw:
                kw[k] = dict(kw[k] or {})
        return cls(**kw)

    def build_method(self) -> nn.Module:
        """The run's method at a fresh initialisation (the current global torch seed decides it)."""
        return build_method(self.method, backbone=self.backbone, head=self.head, predictor=self.predictor,
                            pseudo_collapse=self.pseudo_collapse, collapse=self.collapse,
                            backbone_options=self.backbone_options,
                            **self.method_options)

    def normalisation(self, data_dir: str | None = None, *, dataset: ImageDataset | None = None
                      ) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
        """(mean, std) the run normalised its views with, or (None, None): the training set's channel
        statistics (published ones, else measured on ``dataset``, the train split, loaded from
        ``data_dir``, default the run's, when not given) when ``normalize`` was on. A method's recipe
        carries no mean/std of its own (headgeom.augment.get_recipe normalises only when given them),
        so this is the whole rule; training applies it through this method too."""
        if not self.normalize:
            return None, None
        if self.data not in DATASET_STATS and dataset is None:
            root = data_dir if data_dir is not None else self.data_dir
            dataset = load_dataset(self.data, "train", root, **self.data_options)
        stats = dataset_stats(self.data, dataset)
        return tuple(float(v) for v in stats.mean), tuple(float(v) for v in stats.std)

    def describe(self) -> str:
        return f"method {self.method!r}, backbone {self.backbone!r} {self.backbone_options}"


@dataclass
class TrainedRun:
    """A trained method in eval mode on the CPU, with the settings it was trained under.

    ``config``: the stored TrainConfig mapping as written; ``missing``/``unexpected``: state-dict keys
    the checkpoint did not fill or that the rebuilt method does not have (empty for a run of this
    headgeom)."""

    settings: RunSettings
    config: dict[str, Any]
    method: nn.Module
    checkpoint: Path
    step: int | None
    epoch: float | int | None
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    @property
    def backbone(self) -> nn.Module:
        return self.method.backbone

    @property
    def projector(self) -> nn.Module:
        return self.method.projector

    @property
    def predictor(self) -> nn.Module | None:
        return getattr(self.method, "predictor", None)

    def heads(self, predictor: bool = False) -> dict[str, nn.Module]:
        """The head chain ``{"head": projector}`` (+ ``"pred": predictor`` when asked and present)."""
        chain = {"head": self.projector}
        if predictor and self.predictor is not None:
            chain["pred"] = self.predictor
        return chain

    def normalisation(self, data_dir: str | None = None) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
        """See :meth:`RunSettings.normalisation`."""
        return self.settings.normalisation(data_dir)

    def fresh_method(self, seed: int) -> nn.Module:
        """The same architecture at the initialisation ``seed`` gives (eval mode, CPU), as after
        torch.manual_seed(seed); the caller's random stream is left as it was (:func:`headgeom.rng.seeded`)."""
        with seeded(int(seed)):
            return self.settings.build_method().eval()


def read_run_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The stored TrainConfig mapping of ``run_dir/config.json`` (old records held it at top level)."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: RUN must be a run directory written by `headgeom train --out RUN`")
    record = json.loads(path.read_text(encoding="utf-8"))
    return dict(record["config"] if "config" in record else record)


def build_trained(obj: Mapping[str, Any], checkpoint: Path, config: Mapping[str, Any] | None = None, *,
                  strict: bool = True, reseed: bool = False) -> TrainedRun:
    """Rebuild and fill the method of a safely loaded headgeom training checkpoint ``obj``.

    ``config``: the stored TrainConfig mapping to build from (default: the checkpoint's own);
    ``strict``: raise when the state dict does not fill the method exactly; ``reseed``: build it under
    the run's seed, as a fresh start of the run would (:func:`headgeom.rng.seeded`: the caller's random
    stream is left as it was)."""
    if not isinstance(obj, Mapping) or obj.get("format") != CHECKPOINT_FORMAT:
        got = obj.get("format") if isinstance(obj, Mapping) else type(obj).__name__
        raise TrainedRunError(f"{checkpoint} is not a headgeom training checkpoint (format {got!r}, expected "
                              f"{CHECKPOINT_FORMAT!r}); pass a run directory written by `headgeom train`")
    if obj.get("version") not in CHECKPOINT_VERSIONS:
        raise TrainedRunError(f"{checkpoint}: headgeom training checkpoint version {obj.get('version')!r}; "
                              f"this headgeom reads {list(CHECKPOINT_VERSIONS)}")
    if config is None:
        config = obj.get("config")
    if not isinstance(config, Mapping) or not isinstance(obj.get("method"), Mapping):
        raise TrainedRunError(f"{checkpoint}: headgeom training checkpoint without 'config' or 'method'; "
                              "it is incomplete")
    settings = RunSettings.from_config(config)
    with seeded(settings.seed) if reseed else contextlib.nullcontext():
        method = settings.build_method()
    try:
        result = method.load_state_dict(obj["method"], strict=False)
    except RuntimeError as err:
        raise TrainedRunError(f"{checkpoint}: the tensors do not fit the {settings.method!r} model its own "
                              f"config builds: {err}") from err
    missing = [f"method.{k}" for k in result.missing_keys]
    unexpected = [f"method.{k}" for k in result.unexpected_keys]
    if strict and (missing or unexpected):
        raise TrainedRunError(f"{checkpoint} does not fill its {settings.method!r} method exactly: missing "
                              f"{missing}, unexpected {unexpected}")
    step, epoch = obj.get("step"), obj.get("epoch")
    return TrainedRun(settings=settings, config=dict(config), method=method.eval(), checkpoint=checkpoint,
                      step=None if step is None else int(step), epoch=epoch, missing=missing,
                      unexpected=unexpected)


def load_trained(path: str | os.PathLike[str], checkpoint: str | os.PathLike[str] | None = None, *,
                 reseed: bool = False) -> TrainedRun:
    """The trained run at ``path``: a run directory (settings from its config.json, weights from
    ``checkpoint``, default its ``checkpoints/last.pt``) or a checkpoint file (settings stored in it).

    Raises FileNotFoundError (no run or checkpoint there), the errors of
    :func:`headgeom.runs.safe_load.safe_load` for unreadable or unsafe files, and TrainedRunError for a
    file that is not a complete headgeom training checkpoint or does not fill its method exactly."""
    path = Path(path)
    config = None
    if path.is_dir():
        config = read_run_config(path)
        ckpt = Path(checkpoint) if checkpoint is not None else path / "checkpoints" / "last.pt"
    else:
        ckpt = Path(checkpoint) if checkpoint is not None else path
    if not ckpt.is_file():
        raise FileNotFoundError(missing_checkpoint_message(ckpt))
    loaded = safe_load(ckpt)
    if loaded.stand_ins:
        raise TrainedRunError(f"{ckpt} holds pickled references ({', '.join(loaded.stand_ins)}) that a headgeom "
                              "training checkpoint never holds; it was not written by `headgeom train`")
    return build_trained(loaded.obj, ckpt, config, reseed=reseed)
