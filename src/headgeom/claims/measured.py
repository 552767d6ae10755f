"""One measured entry of a claim row: a value with its n and its spread or interval (house rule 9).

A row's ``measured`` maps names to :class:`Measured` entries (or to a plain JSON scalar, e.g. a verdict
word quoted beside the numbers). Its JSON form is the dict results.json holds::

    {"value": 0.12, "n": 3, "spread": 0.04, "spread_kind": "std over n (ddof=1)", "min": 0.08, "max": 0.17,
     "ci": [lo, hi], "level": 0.95, <extra keys: "what", "definition", "per_seed_ci", ...>}

``value`` and ``n`` always; the other standard keys only when given (a key written as null, e.g. the
"spread": null of a single model's bootstrap estimate, is kept as null); any other key is an extra, kept
in order. :func:`headgeom.claims.estimates.measured` builds the usual mean ± std entry. A Measured also
reads as the mapping of its JSON form (``m["value"]``, ``m.get("ci")``), so a formatter written for a
results file reads a live entry too.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["STANDARD_KEYS", "Measured", "check_measured_value"]

STANDARD_KEYS = ("spread", "spread_kind", "min", "max", "ci", "level")
"""The keys of a measured entry besides value and n that the type names; anything else is an extra."""

Number = float | int | str | None  # a JSON number as headgeom writes it: null for NaN, "inf"/"-inf"


def _is_number(x: Any) -> bool:
    """A JSON number as headgeom writes or reads it (headgeom.io.json_safe): a real, None (NaN), "inf"/"-inf"."""
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) or x in ("inf", "-inf")


@dataclass(frozen=True)
class Measured(Mapping[str, Any]):
    """A measured value with n and its spread (module docstring); frozen, checked when made."""

    value: Number
    n: int
    spread: Number = None
    spread_kind: str | None = None
    min: Number = None
    max: Number = None
    ci: tuple[Number, Number] | None = None
    level: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    nulls: frozenset[str] = frozenset()  # standard keys written as null (present, no value)
    _json: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 0:
            raise ValueError(f"a measured entry needs n, a count >= 0; got n={self.n!r}")
        for key in ("value", "spread", "min", "max"):
            if not _is_number(getattr(self, key)):
                raise ValueError(f"measured {key} must be a number (or null, 'inf', '-inf'); got {getattr(self, key)!r}")
        if self.ci is not None:
            if not isinstance(self.ci, (tuple, list)) or len(self.ci) != 2 or not all(_is_number(c) for c in self.ci):
                raise ValueError(f"a measured ci is the pair [lo, hi] of numbers; got {self.ci!r}")
            object.__setattr__(self, "ci", tuple(self.ci))
        if self.spread_kind is not None and not isinstance(self.spread_kind, str):
            raise ValueError(f"a measured spread_kind is text (e.g. 'std over n (ddof=1)'); got {self.spread_kind!r}")
        clash = [k for k in self.extra if k in ("value", "n", *STANDARD_KEYS) or not isinstance(k, str)]
        if clash:
            raise ValueError(f"extra keys {clash} of a measured entry name its own fields (or are not text); "
                             "pass them as fields")
        odd = sorted(set(self.nulls) - set(STANDARD_KEYS))
        if odd:
            raise ValueError(f"only the standard keys {STANDARD_KEYS} can be written as null; got {odd}")
        object.__setattr__(self, "extra", dict(self.extra))
        object.__setattr__(self, "nulls", frozenset(self.nulls))
        out: dict[str, Any] = {"value": self.value, "n": self.n}
        for key in STANDARD_KEYS:
            v = getattr(self, key)
            if v is not None or key in self.nulls:
                out[key] = list(v) if key == "ci" and v is not None else v
        out.update(self.extra)
        object.__setattr__(self, "_json", out)

    @classmethod
    def from_json(cls, entry: Mapping[str, Any], name: str = "?") -> Measured:
        """The entry of its JSON form (module docstring); ValueError naming ``name`` when it is not one."""
        if isinstance(entry, Measured):
            return entry
        if not isinstance(entry, Mapping) or "value" not in entry or "n" not in entry:
            raise ValueError(f"measured entry {name!r} must hold at least 'value' and 'n' (build it with "
                             f"headgeom.claims.estimates.measured); got {entry!r}")
        fields = {k: entry[k] for k in STANDARD_KEYS if k in entry}
        nulls = frozenset(k for k, v in fields.items() if v is None)
        extra = {k: v for k, v in entry.items() if k not in ("value", "n", *STANDARD_KEYS)}
        try:
            return cls(value=entry["value"], n=entry["n"], extra=extra, nulls=nulls, **fields)
        except ValueError as err:
            raise ValueError(f"measured entry {name!r}: {err}") from err

    def to_json(self) -> dict[str, Any]:
        """The JSON form (a fresh dict)."""
        return dict(self._json)

    def replace(self, **changes: Any) -> Measured:
        """A copy with ``changes`` to its JSON form (standard keys or extras), e.g. ``spread=None``."""
        return Measured.from_json({**self._json, **changes})

    @property
    def finite_value(self) -> float:
        """``value`` as a float: NaN for null, ±inf for "inf"/"-inf"."""
        v = self.value
        return math.nan if v is None else float(v)

    # the mapping of the JSON form
    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)


def check_measured_value(value: Any, name: str) -> Measured | str | float | int | bool | None:
    """A row's measured value: a :class:`Measured` (a dict of its JSON form is converted) or a plain JSON
    scalar quoted beside the numbers (text, number, bool, null); ValueError for anything else."""
    if isinstance(value, Measured):
        return value
    if isinstance(value, Mapping):
        return Measured.from_json(value, name)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ValueError(f"measured entry {name!r} must be a measured dict (value, n, spread) or a plain value; "
                     f"got {type(value).__name__} {value!r}")
