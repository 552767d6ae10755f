"""Reuse a head's analysis copy across calls while the head is unchanged, checked, never assumed.

A tracker analyses the same head object at every step; copying and casting it, and deriving its
layer structure, each time is a fixed cost paid before the first block. The cache keeps one
analysis copy per (head, dtype, device) and hands it out again only when a fresh copy would be
identical. Before each reuse it checks, without trusting the caller:

- the module tree: names, types, train/eval flags, plain attributes (``eps``, ``beta``, ...),
  hooks (a replaced or reconfigured layer invalidates);
- every parameter and buffer: the same tensor object, shape, dtype, device, data pointer and
  autograd ``_version`` (``load_state_dict``, optimizer steps and ``torch.no_grad()`` in-place
  updates bump it);
- their contents, against the copy (cast like the copy was): ``p.data.add_(...)`` and the
  running-statistics updates of a train-mode BatchNorm forward change values without bumping
  ``_version``, so counters and pointers alone cannot be trusted.

The content check reads the weights once, which costs far less than the deep copy, cast and
structure discovery it replaces. A :class:`HeadCache` is an object its owner passes in (the
tracker and the monitor keep one across their measurements), never module state. It holds the
head weakly; it holds its current parameter tensors strongly (so that their identities cannot be
reused by new tensors) until the next call on that head replaces the entry. Heads whose modules carry attributes that
cannot be compared (arbitrary objects) are never cached.
"""
from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn
from torch.nn.utils.weight_norm import WeightNorm

_SIMPLE = (type(None), bool, int, float, complex, str, torch.dtype, torch.device)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
          "_state_dict_hooks", "_load_state_dict_pre_hooks")


class _Uncacheable(Exception):
    """The head holds state the cache cannot compare; it is copied afresh every time."""


def _simple(value: Any) -> Any:
    if isinstance(value, _SIMPLE):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_simple(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a spec (HeadSpec): by value
        return (type(value), _simple(dataclasses.astuple(value)))
    raise _Uncacheable(type(value).__name__)


def _structure(head: nn.Module) -> tuple:
    """What a copy depends on besides tensors: the module tree, modes, attributes and hooks."""
    out = []
    for name, mod in head.named_modules(remove_duplicate=False):
        # the weight of a torch.nn.utils.weight_norm layer is a plain attribute recomputed from
        # weight_g, weight_v (compared as tensors) by its hook: nothing of its own to compare
        derived = {h.name for h in mod._forward_pre_hooks.values() if isinstance(h, WeightNorm)}
        attrs = tuple(sorted((k, _simple(v)) for k, v in vars(mod).items() if not k.startswith("_")
                             and k != "training" and k not in derived))
        hooks = tuple(tuple(id(h) for h in getattr(mod, h_name, {}).values()) for h_name in _HOOKS)
        out.append((name, type(mod), id(mod), mod.training, attrs, hooks))
    return tuple(out)


def _tensors(head: nn.Module) -> list[tuple[str, Tensor]]:
    return list(head.named_parameters(remove_duplicate=False)) + list(head.named_buffers(remove_duplicate=False))


def _stamp(t: Tensor) -> tuple:
    return (tuple(t.shape), t.dtype, t.device, t.data_ptr(), t._version)


@dataclass
class _Entry:
    prepared: Any  # the PreparedHead handed out
    structure: tuple
    sources: list[tuple[str, Tensor, tuple]]  # name, the head's tensor (strong ref), its stamp
    copies: dict[str, Tensor]  # name -> the analysis copy's tensor (absent: dropped, e.g. train-BN stats)

    def valid_for(self, head: nn.Module) -> bool:
        if _structure(head) != self.structure:
            return False
        now = _tensors(head)
        if len(now) != len(self.sources):
            return False
        for (name, t), (name0, t0, stamp0) in zip(now, self.sources):
            if name != name0 or t is not t0:
                return False
            if name in self.copies and _stamp(t) != stamp0:  # a dropped tensor (train-BN stats) may move
                return False
        with torch.no_grad():
            for name, t, _ in self.sources:
                copy = self.copies.get(name)
                if copy is not None and not torch.equal(copy, t.detach().to(device=copy.device, dtype=copy.dtype)):
                    return False
        return True


class HeadCache:
    """Analysis copies of heads, kept for whoever analyses the same heads across calls.

    Owned and passed in by the caller that reuses a head (the tracker, the monitor:
    ``effective_hessian(head, loss, z, cache=cache)``); a call without one copies the head afresh.
    One copy per (head, dtype, device), handed out again only while :meth:`_Entry.valid_for`
    finds the head unchanged. Heads are held weakly.
    """

    def __init__(self) -> None:
        self._entries: "weakref.WeakKeyDictionary[nn.Module, dict[tuple, _Entry]]" = weakref.WeakKeyDictionary()
        # analysis copies this cache handed out -> (key, weak PreparedHead): a copy passed back in is not copied again
        self._handed_out: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()

    def prepared(self, head: nn.Module, dtype: torch.dtype, device: torch.device,
                 build: Callable[[nn.Module, torch.dtype, torch.device], Any]) -> Any:
        """``build(head, dtype, device)`` (a PreparedHead with ``.module``), reused while valid.

        An analysis copy handed out by this cache and passed back in (the tracker prepares a
        head, then gives the copy to the engine) is returned as it is, not copied again.
        """
        device = torch.device(device)
        key = (dtype, device)
        back = self._handed_out.get(head)
        if back is not None and back[0] == key and back[1]() is not None:
            return back[1]()
        per_head = self._entries.get(head)
        entry = per_head.get(key) if per_head is not None else None
        try:
            if entry is not None and entry.valid_for(head):
                return entry.prepared
            structure = _structure(head)
            sources = [(name, t, _stamp(t)) for name, t in _tensors(head)]
        except (_Uncacheable, RuntimeError):  # RuntimeError: inference tensors have no _version
            if per_head is not None:
                per_head.pop(key, None)
            return build(head, dtype, device)
        prepared = build(head, dtype, device)
        work = prepared.module
        copies = {name: t for name, t in _tensors(work)}
        self._entries.setdefault(head, {})[key] = _Entry(prepared, structure, sources, copies)
        self._handed_out[work] = (key, weakref.ref(prepared))  # weak: the copy must not keep itself alive
        return prepared

    def __len__(self) -> int:
        """The number of analysis copies held."""
        return sum(len(per_head) for per_head in self._entries.values())

    def clear(self) -> None:
        """Forget every analysis copy."""
        self._entries.clear()
        self._handed_out.clear()
