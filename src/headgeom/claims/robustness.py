"""How a row's verdict depends on a convention it names: the verdict recomputed over a stated range of the
convention's values (the view gap, the collapse fraction, the sign floor, the majority rule, ...).

A row lists the conventions its verdict depends on (``Row.conventions``) and, per convention swept, a
:class:`Robustness`: the value the row used (``at``), the values tried, the rule's verdict at each, and
``status``, "robust" when every value gives the row's verdict, else "flips at <values>" (those that do not).
Re-running a rule (a pure function returning a :class:`~headgeom.claims.verdict.Verdict`) over the values
is :func:`sweep`. JSON form, per convention: ``{"at", "values", "verdicts", "status"}``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headgeom.claims.verdict import Verdict, check_verdict

__all__ = ["ROBUST", "Robustness", "robustness_text", "status_of", "sweep", "sweep_grid", "with_own"]

ROBUST = "robust"
FLIPS = "flips at "


def status_of(at: Any, values: Sequence[Any], verdicts: Sequence[str]) -> str:
    """"robust" when every verdict equals the one at ``at`` (which must be among ``values``), else "flips at"
    and the values whose verdict differs, e.g. "flips at 0.3, 1"."""
    if at not in values:
        raise ValueError(f"the row's own setting {at!r} must be among the values swept {list(values)}")
    own = verdicts[list(values).index(at)]
    flips = [v for v, verdict in zip(values, verdicts) if verdict != own]
    return ROBUST if not flips else FLIPS + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in flips)


@dataclass(frozen=True)
class Robustness:
    """The verdict of one row over one convention's values (module docstring)."""

    at: Any
    values: tuple[Any, ...]
    verdicts: tuple[str, ...]
    status: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "verdicts", tuple(self.verdicts))
        if len(self.values) != len(self.verdicts) or not self.values:
            raise ValueError(f"a robustness sweep gives one verdict per value tried; got {len(self.values)} values "
                             f"and {len(self.verdicts)} verdicts")
        for v in self.verdicts:
            check_verdict(v, "robustness sweep")
        expected = status_of(self.at, self.values, self.verdicts)
        if self.status != expected:
            raise ValueError(f"robustness status {self.status!r} does not follow from the verdicts swept; "
                             f"it is {expected!r}")

    @classmethod
    def of(cls, at: Any, values: Sequence[Any], verdicts: Sequence[str]) -> Robustness:
        """The sweep with its status computed (:func:`status_of`)."""
        return cls(at, tuple(values), tuple(verdicts), status_of(at, values, verdicts))

    @classmethod
    def from_json(cls, entry: Mapping[str, Any], name: str = "?") -> Robustness:
        if isinstance(entry, Robustness):
            return entry
        if not isinstance(entry, Mapping) or set(entry) != {"at", "values", "verdicts", "status"}:
            raise ValueError(f"robustness of {name!r} must be {{'at', 'values', 'verdicts', 'status'}}; got {entry!r}")
        return cls(entry["at"], entry["values"], entry["verdicts"], entry["status"])

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "values": list(self.values), "verdicts": list(self.verdicts), "status": self.status}


def sweep(rule: Callable[[Any], Verdict], at: Any, values: Sequence[Any]) -> Robustness:
    """``rule(value)`` at every value (``at``, the row's own, among them): the verdicts and their status."""
    return Robustness.of(at, values, [rule(v).outcome for v in values])


def with_own(at: Any, values: Sequence[Any]) -> list[Any]:
    """The values of a numeric convention to sweep, the row's own setting ``at`` among them, ascending."""
    return sorted({*values, at})


def robustness_text(robust: Mapping[str, Robustness]) -> str:
    """The sweeps in words for a row's criterion, e.g. "rel_tol over [1e-12, 1e-10]: robust; majority over [0.5, 0.8]:
    flips at 0.5"."""
    return "; ".join(f"{name} over {list(r.values)}: {r.status}" for name, r in robust.items())


def sweep_grid(rule: Callable[[Any], Verdict], at: Any, grid: Sequence[Any]) -> Robustness:
    """:func:`sweep` over a stated ``grid`` of a convention's values with the row's own ``at`` added where the grid
    lacks it (sorted)."""
    return sweep(rule, at, with_own(at, grid))
