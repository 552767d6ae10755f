"""The paper's two training recipes (docs/paper.md §3) as TrainConfig bases, and the cells built from them.

The training experiments (C8, the collapse grid, the activation ablation: SimSiam; C9, C11, C12:
SimCLR) nest one :class:`~headgeom.train.config.TrainConfig` each, ``train``, built from one of
these bases with ``dataclasses.replace``; a cell's TrainConfig is that ``train`` with the cell's
head, seed (and what else the cell varies) replaced in, never a copy of its fields.

    SIMSIAM  SimSiam, bias-free projector/predictor (filled in per cell), SGD with momentum, no weight
             decay, the paper's crop (0.2, 1) + flip recipe without normalisation ("Collapse grid")
    SIMCLR   the one-directional InfoNCE at T = 0.1, Adam 1e-3, constant schedule ("SimCLR for
             guillotine/orbits")

The bases carry the quick presets' scale (shapes data, ResNet-18 width 0.125, CPU, no progress bar);
each experiment's presets replace what they change: :func:`on_cifar10` (the small presets) and
:func:`paper_scale` (the paper presets) say the data and scale once, the preset its own numbers.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .config import TrainConfig

__all__ = ["CELL_FIELDS", "SIMCLR", "SIMSIAM", "on_cifar10", "paper_head", "paper_predictor", "paper_scale",
           "simclr_cell", "simsiam_cell"]

SIMSIAM = TrainConfig(
    method="simsiam", backbone="resnet18", backbone_options={"width": 0.125},
    method_options={"recipe": "paper_simsiam"}, data="shapes", data_options={"n": 1024}, normalize=False,
    optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.0, schedule="cosine", device="cpu", progress=False,
)

SIMCLR = TrainConfig(
    method="simclr_oneway", backbone="resnet18", backbone_options={"width": 0.125},
    method_options={"temperature": 0.1}, data="shapes", data_options={"n": 2048}, optimizer="adam", lr=1e-3,
    weight_decay=0.0, schedule="constant", device="cpu", progress=False,
)


def on_cifar10(train: TrainConfig, **changes: Any) -> TrainConfig:
    """``train`` on CIFAR-10 (the bases' shapes options dropped), with ``changes``."""
    return dataclasses.replace(train, data="cifar10", data_options={}, **changes)


def paper_scale(train: TrainConfig, **changes: Any) -> TrainConfig:
    """``train`` at the paper's scale: CIFAR-10, the full-width backbone, no cap on the steps, on the GPU
    when there is one (``device="auto"``); with ``changes`` (batch size, epochs, tracking period, ...)."""
    return on_cifar10(train, backbone_options={"width": 1.0}, max_steps=None, device="auto", **changes)


def paper_head(activation: str, hidden: int, out: int, bn: bool = False) -> str:
    """The paper's projector (docs/paper.md §3) as a head string with the first width filled in by the
    backbone: Linear(d→hidden, no bias) → [BN] → act → Linear(hidden→out, no bias) → [BN];
    ``linear`` = the two Linears with nothing between."""
    return f"d-{hidden}-{out}:{activation}:nobias" + (":bn:last=bn" if bn else "")


def paper_predictor(activation: str, hidden: int, out: int, bn: bool = False) -> str:
    """The collapse grid's predictor out→hidden→out (paper 2048→512→2048) with the projector's
    activation, BN on the hidden layer when the projector has BN (SimSiam's predictor), no bias."""
    return f"d-{hidden}-{out}:{activation}:nobias" + (":bn" if bn else "")


CELL_FIELDS: dict[str, str] = {
    "head": "each cell builds its projector from the experiment's own settings (hidden, out_dim, ...): set those",
    "seed": "cells run seeds 0 .. n-1: set how many with --seeds N",
}
"""The TrainConfig fields both cell builders below always replace, each with what to set instead of
``--set train.<field>`` (which the runner refuses for every training experiment: its cells would ignore it)."""


def simsiam_cell(train: TrainConfig, activation: str, seed: int, *, hidden: int, out_dim: int, pred_hidden: int,
                 bn: bool = False) -> TrainConfig:
    """``train`` (a SimSiam recipe, e.g. :data:`SIMSIAM` replaced) with one cell's projector
    d→hidden→out_dim and predictor out_dim→pred_hidden→out_dim, both with ``activation`` (and BN), and ``seed``."""
    return dataclasses.replace(train, head=paper_head(activation, hidden, out_dim, bn),
                               predictor=paper_predictor(activation, pred_hidden, out_dim, bn), seed=seed)


def simclr_cell(train: TrainConfig, head: str, seed: int, *, backbone: str | None = None,
                backbone_options: dict | None = None, data: str | None = None) -> TrainConfig:
    """``train`` (a SimCLR recipe, e.g. :data:`SIMCLR` replaced) with one cell's head and seed, and,
    where the cell varies them, its backbone (with its options) and dataset."""
    changes: dict = {"head": head, "seed": seed}
    if backbone is not None:
        changes.update(backbone=backbone, backbone_options=dict(backbone_options or {}))
    if data is not None:
        changes["data"] = data
    return dataclasses.replace(train, **changes)
