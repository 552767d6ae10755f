"""Work buffers reused across calls, so that a repeated analysis maps no fresh memory.

A large temporary (the scaled weight of a per-sample Jacobian, the sandwich's middle factor, the
row tiles of a weighted Gram: tens of MiB at the paper's widths) allocated at every call is above
glibc's mmap threshold (at most 32 MiB), so each call maps it afresh and pays a page fault per 4 KiB
of it. A :class:`Workspace` keeps one flat buffer per name and hands out views of it; it lives as
long as the analysis copy of a head (its :class:`~headgeom.geometry.engine.head_facts.HeadFacts`,
kept across calls by a :class:`~headgeom.geometry.engine.head_cache.HeadCache`). Contents are
never read before they are written: results are never views of a buffer.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import Tensor


class Workspace:
    """Reusable flat buffers by name; one caller at a time (:meth:`lease`)."""

    def __init__(self) -> None:
        self._buffers: dict[str, Tensor] = {}
        self._lock = threading.Lock()

    def buffer(self, name: str, numel: int, like: Tensor) -> Tensor:
        """A flat view of at least ``numel`` entries of ``like``'s dtype and device (contents undefined)."""
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != like.dtype or buf.device != like.device:
            self._buffers.pop(name, None)  # the old one is freed before a larger one is taken
            buf = torch.empty(numel, dtype=like.dtype, device=like.device)
            self._buffers[name] = buf
        return buf[:numel]

    def nbytes(self) -> int:
        """Bytes held."""
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

    @contextmanager
    def lease(self) -> Iterator["Workspace"]:
        """This workspace while no other call uses it; a fresh one (freed after) if another thread does."""
        if not self._lock.acquire(blocking=False):
            yield Workspace()
            return
        try:
            yield self
        finally:
            self._lock.release()


def work_buffer(workspace: Workspace | None, name: str, numel: int, like: Tensor) -> Tensor:
    """``workspace.buffer(name, numel, like)``, or a fresh flat tensor when there is no workspace."""
    if workspace is None:
        return torch.empty(numel, dtype=like.dtype, device=like.device)
    return workspace.buffer(name, numel, like)
