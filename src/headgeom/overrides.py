"""``KEY=VALUE`` overrides of a frozen config dataclass, nested keys with dots (``train.batch_size=64``).

``headgeom reproduce --set`` hands its assignments to :func:`apply_overrides` for every selected
experiment's resolved preset. VALUE is read as JSON (``64``, ``0.5``, ``null``, ``true``,
``["relu", "silu"]``, ``{"n": 512}``) and otherwise taken as a string (``train.data=cifar10``); a JSON list
becomes a tuple where the field holds a tuple, an int becomes a float where it holds a float. The
result is built with ``dataclasses.replace``, so each config's own checks (``TrainConfig.__post_init__``)
judge the new value. An unknown key is an error that names the known ones, and a key that names a field
of a nested config (``batch_size`` for ``train.batch_size``) says which key to write instead.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

__all__ = ["apply_overrides", "parse_assignment"]


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


def apply_overrides(config: Any, assignments: Sequence[str]) -> Any:
    """``config`` (a frozen dataclass) with every ``KEY=VALUE`` of ``assignments`` applied in order.
    Raises ValueError for a malformed assignment, an unknown key, or a value the config rejects."""
    for text in assignments:
        if not dataclasses.is_dataclass(config):
            raise ValueError(f"--set {text!r}: the config {type(config).__name__} is not a dataclass; it has no keys")
        path, value = parse_assignment(text)
        try:
            config = _set(config, path, value, text)
        except (TypeError, ValueError) as err:
            if str(err).startswith("--set "):
                raise
            raise ValueError(f"--set {text!r}: {err}") from err
    return config
