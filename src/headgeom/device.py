"""Which torch device a command runs on: ``resolve_device("auto" | "cpu" | "cuda[:i]" | "mps")``.

The one rule for every command that takes ``--device`` (train, evaluate, analyze, the experiments),
kept beneath all of them so none imports another for it.
"""
from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; otherwise ``torch.device(name)``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available; use --device cpu")
    return dev
