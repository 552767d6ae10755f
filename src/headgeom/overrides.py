"""``KEY=VALUE`` overrides of a frozen config dataclass, nested keys with dots (``train.batch_size=64``).

``headgeom reproduce --set`` hands its assignments to :func:`apply_overrides` for every selected
experiment's resolved preset. VALUE is read as JSON (``64``, ``0.5``, ``null``, ``true``,
``["relu", "silu"]``, ``{"n": 512}``) and otherwise taken as a string (``train.data=cifar10``); a JSON list
becomes a tuple where the field holds a tuple, an int becomes a float where it holds a float. The
result is built with ``dataclasses.replace``, so each config's own checks (``TrainConfig.__post_init__``)
judge the new value. An unknown key is an error that names the known ones, and a key that names a field
of a nested config (``batch_size`` for ``train.batch_size``) says which key to write instead.

A key that the experiment sets itself in its cells is refused too, since the value would be silently
ignored: one it declares (``Experiment.cell_keys``, each with what to set instead: GRID's ``train.lr``,
each run's own lr; C6's ``system.train_backbone``, its regime), checked by :func:`apply_overrides`, and,
for a training experiment, the head and seed (which every cell builds itself) and any other field of
its nested training config that no cell's own training config holds, found by :func:`cells_ignoring`
(a field only some cells replace is run, with a note saying which cells ignore it).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Sequence

__all__ = ["apply_overrides", "cells_ignoring", "parse_assignment"]


def parse_assignment(text: str) -> tuple[list[str], Any]:
    """``"train.batch_size=64"`` -> (["train", "batch_size"], 64); VALUE as the module docstring says."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        raise ValueError(f"--set {text!r} is not KEY=VALUE (e.g. --set train.batch_size=64)")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def _fields(config: Any) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(config)}


def _nested_home(config: Any, name: str) -> str | None:
    """``train.batch_size`` when ``name`` is a field of a nested config of ``config`` (else None)."""
    for f in dataclasses.fields(config):
        sub = getattr(config, f.name)
        if dataclasses.is_dataclass(sub) and name in _fields(sub):
            return f"{f.name}.{name}"
    return None


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _coerce(field: dataclasses.Field, old: Any, value: Any) -> Any:
    """``value`` in the shape of the field: JSON lists become (nested) tuples where the field holds or is
    declared a tuple, an int becomes a float where it holds a float."""
    if isinstance(value, list) and (isinstance(old, tuple) or "tuple" in str(field.type)):
        return _tuples(value)
    if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _set(config: Any, path: list[str], value: Any, text: str) -> Any:
    name, rest = path[0], path[1:]
    known = _fields(config)
    where = type(config).__name__
    if name not in known:
        home = _nested_home(config, name)
        hint = (f"; it is {home} now (the training recipe nests in its own config): write --set {home}=..."
                if home else f"; known keys: {', '.join(sorted(known))}")
        raise ValueError(f"--set {text!r}: {where} has no key {name!r}{hint}")
    old = getattr(config, name)
    if rest:
        if not dataclasses.is_dataclass(old):
            raise ValueError(f"--set {text!r}: {where}.{name} is not a nested config, so {'.'.join(path)!r} "
                             f"names nothing; write --set {name}=...")
        return dataclasses.replace(config, **{name: _set(old, rest, value, text)})
    if dataclasses.is_dataclass(old):
        raise ValueError(f"--set {text!r}: {where}.{name} is a nested config; set one of its keys, e.g. "
                         f"--set {name}.{next(iter(_fields(old)))}=...")
    return dataclasses.replace(config, **{name: _coerce(known[name], old, value)})


def _refuse_cell_key(path: list[str], text: str, cell_keys: Mapping[str, str]) -> None:
    key = ".".join(path)
    for fixed, instead in cell_keys.items():
        if key == fixed or key.startswith(fixed + "."):
            raise ValueError(f"--set {text!r}: every cell sets {fixed} itself, so this value would be ignored; "
                             f"{instead}")


def apply_overrides(config: Any, assignments: Sequence[str], cell_keys: Mapping[str, str] | None = None) -> Any:
    """``config`` (a frozen dataclass) with every ``KEY=VALUE`` of ``assignments`` applied in order.

    ``cell_keys``: keys the experiment sets itself in every cell (``Experiment.cell_keys``), each with
    what to set instead. Raises ValueError for a malformed assignment, an unknown key, a key of
    ``cell_keys`` (or below one), or a value the config rejects."""
    for text in assignments:
        if not dataclasses.is_dataclass(config):
            raise ValueError(f"--set {text!r}: the config {type(config).__name__} is not a dataclass; it has no keys")
        path, value = parse_assignment(text)
        _refuse_cell_key(path, text, cell_keys or {})
        try:
            config = _set(config, path, value, text)
        except (TypeError, ValueError) as err:
            if str(err).startswith("--set "):
                raise
            raise ValueError(f"--set {text!r}: {err}") from err
    return config



def cells_ignoring(config: Any, assignments: Sequence[str], cell_configs: Sequence[tuple[Any, Any]],
                   what_instead: str) -> list[str]:
    """Refuse an assignment ``nested.field=VALUE`` that every cell replaces; a note for one some cells replace.

    ``config``: the experiment's config with ``assignments`` applied; ``cell_configs``: (cell, the
    nested config that cell runs, e.g. its TrainConfig) for every cell. An assignment to a field of
    a nested config of that type is ignored by a cell whose own config holds another value there.
    Raises ValueError (with ``what_instead``) when every cell ignores it; returns a note per
    assignment that only some cells ignore (e.g. ``train.backbone_options`` in C9's ViT cells).
    """
    notes: list[str] = []
    if not cell_configs:
        return notes
    kind = type(cell_configs[0][1])
    for text in assignments:
        path, _ = parse_assignment(text)
        nested = getattr(config, path[0], None)
        if len(path) != 2 or type(nested) is not kind:
            continue
        key, value = ".".join(path), getattr(nested, path[1])
        differ = [(cell, getattr(own, path[1])) for cell, own in cell_configs if getattr(own, path[1]) != value]
        if not differ:
            continue
        cell, own = differ[0]
        which = (f"{len(differ)} of {len(cell_configs)} cells set {key} themselves (e.g. the cell {cell} runs "
                 f"{path[1]}={own!r}), so {value!r} ")
        if len(differ) == len(cell_configs):
            raise ValueError(f"--set {text!r}: {which}would be ignored; {what_instead}")
        notes.append(f"--set {text}: {which}does not reach them")
    return notes
