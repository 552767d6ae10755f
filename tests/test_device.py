"""headgeom.device.resolve_device: the one --device rule of every command."""
from __future__ import annotations

import pytest
import torch

import headgeom.train.loop
from headgeom.device import resolve_device


def test_names_resolve_to_their_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_cuda_without_cuda_says_what_to_use(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="'cuda:1' requested but CUDA is not available; use --device cpu"):
        resolve_device("cuda:1")


def test_the_training_loop_names_the_same_rule():
    # scripts written against headgeom.train.loop.resolve_device keep working
    assert headgeom.train.loop.resolve_device is resolve_device
