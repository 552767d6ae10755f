"""A claim row: one verdict on one claim in one setting, with what it was measured and judged on.

The one schema of the rows results.json holds, checked in one place (:meth:`Row.__post_init__`): an
experiment's ``summarize`` builds :class:`Row` objects, the runner adds where they come from, results.json
stores :meth:`Row.to_json`, and the report and the results blocks read them back with :meth:`Row.from_json`.

Required: ``id`` (the claim, "C4"), ``statement``, ``setting`` (objective, head, reading, preset, ...),
``measured`` ({name: :class:`~headgeom.claims.measured.Measured` or a plain value}), ``verdict`` (one of
:data:`~headgeom.claims.verdict.VERDICTS`), ``evidence`` (a kind of :data:`~headgeom.claims.evidence.KINDS`:
what the verdict can mean), ``headline`` (the measured key the verdict was decided on, quoted first) and
``criterion`` (the rule, in words). Optional, written only when present: ``reason`` (the outcome in words,
apart from the criterion), ``budget`` (:class:`~headgeom.claims.budget.Budget`, training rows),
``out_of_distribution`` (:class:`~headgeom.claims.ood.OutOfDistribution`), ``conventions`` (the settings the
verdict depends on), ``robustness`` ({convention: :class:`~headgeom.claims.robustness.Robustness`}),
``view_gap`` (a Measured: the angle between two views' head outputs), ``headline_text`` (the headline in words
a reader understands, e.g. "share of ReLU runs that stay collapsed under gradient flow"; reports show it
before the internal key, which stays in the details), and what the runner adds: ``source``
(:mod:`headgeom.claims.sources`), ``experiment`` (the id of the experiment that made it) and
``incomplete`` (failed cells). Settings carry ``preset`` for headgeom's own rows.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headgeom.claims.budget import Budget
from headgeom.claims.evidence import TEST, check_identity_data, check_kind
from headgeom.claims.measured import Measured, check_measured_value
from headgeom.claims.ood import OutOfDistribution
from headgeom.claims.robustness import Robustness
from headgeom.claims.verdict import Verdict, check_verdict

__all__ = ["NOT_MEASURED", "NAME_KEYS", "OPTIONAL_KEYS", "REQUIRED_KEYS", "Row", "row_name"]

NOT_MEASURED = "not measured: "
"""How the reason of a test row starts when its measurement could not be made (e.g. its data is missing): it
is inconclusive, says what is missing, and has no verdict whose conventions could be re-judged."""

REQUIRED_KEYS = ("id", "statement", "setting", "measured", "verdict", "criterion", "evidence", "headline")
OPTIONAL_KEYS = ("reason", "budget", "out_of_distribution", "conventions", "robustness", "view_gap", "headline_text",
                 "source", "experiment", "incomplete")
NAME_KEYS = ("part", "state", "reading", "probe", "metric", "regime", "objective")
"""The setting keys that tell one claim's rows apart, in the order a row's name gives them."""


def row_name(cid: Any, setting: Any) -> str:
    """``C4 (reading tangential, part collapsed states)``: the id and the setting keys that tell a row apart."""
    setting = setting if isinstance(setting, Mapping) else {}
    told = ", ".join(f"{k} {setting[k]}" for k in NAME_KEYS if setting.get(k))
    return f"{cid}" + (f" ({told})" if told else "")


@dataclass(frozen=True)
class Row:
    """One claim row (module docstring); frozen and checked when made. ``setting`` and ``measured`` are copied;
    dicts of the JSON forms of the typed entries (measured, budget, out_of_distribution, robustness, view_gap)
    are converted."""

    id: str
    statement: str
    setting: Mapping[str, Any]
    measured: Mapping[str, Any]
    verdict: str
    evidence: str
    headline: str
    criterion: str
    reason: str | None = None
    budget: Budget | None = None
    out_of_distribution: OutOfDistribution | None = None
    conventions: tuple[str, ...] = ()
    robustness: Mapping[str, Robustness] = field(default_factory=dict)
    view_gap: Measured | None = None
    headline_text: str | None = None
    source: str | None = None
    experiment: str | None = None
    incomplete: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a claim row needs an id, the claim it judges (e.g. 'C4'); got {self.id!r}")
        if not isinstance(self.setting, Mapping):
            raise ValueError(f"claim row {self.id}: setting must be a dict of named settings; got {self.setting!r}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen: checked copies)
        set_("setting", dict(self.setting))
        name = self.name
        for key in ("statement", "criterion"):
            if not isinstance(getattr(self, key), str):
                raise ValueError(f"claim row {name}: {key} must be text; got {getattr(self, key)!r}")
        if not isinstance(self.measured, Mapping):
            raise ValueError(f"claim row {name}: measured must be a dict of named entries; got {self.measured!r}")
        try:
            set_("measured", {str(k): check_measured_value(v, k) for k, v in self.measured.items()})
        except ValueError as err:
            raise ValueError(f"claim row {name}: {err}") from err
        check_verdict(self.verdict, name)
        check_kind(self.evidence, name)
        self._check_headline()
        check_identity_data(self.evidence, self.verdict, self.measured[self.headline], name)
        if self.budget is not None:
            set_("budget", Budget.from_json(self.budget, name))
        if self.out_of_distribution is not None:
            set_("out_of_distribution", OutOfDistribution.from_json(self.out_of_distribution, name))
        if self.view_gap is not None:
            set_("view_gap", Measured.from_json(self.view_gap, "view_gap"))
        set_("conventions", tuple(self.conventions))
        set_("robustness", {str(k): Robustness.from_json(v, k) for k, v in dict(self.robustness).items()})
        unnamed = sorted(set(self.robustness) - set(self.conventions))
        if unnamed:
            raise ValueError(f"claim row {name}: robustness over {unnamed}, which its conventions "
                             f"{list(self.conventions)} do not name")
        for key in ("reason", "headline_text", "source", "experiment", "incomplete"):
            if getattr(self, key) is not None and not isinstance(getattr(self, key), str):
                raise ValueError(f"claim row {name}: {key} must be text; got {getattr(self, key)!r}")

    def _check_headline(self) -> None:
        keys = sorted(self.measured)
        if self.headline is None:
            raise ValueError(f"claim row {self.name} names no headline: set 'headline' to the measured entry "
                             f"its verdict was decided on, one of {keys} (add it with measured(...) if it is not there)")
        if self.headline not in self.measured:
            raise ValueError(f"claim row {self.name}: headline {self.headline!r} is not one of its measured keys "
                             f"{keys}; name the measured entry that decided the verdict")

    @property
    def name(self) -> str:
        """The id and the setting keys that tell the row apart (:func:`row_name`)."""
        return row_name(self.id, self.setting)

    @property
    def decision(self) -> Verdict:
        """The row's verdict and the measured key that decided it, as a rule returns them."""
        return Verdict(self.verdict, self.headline, self.reason or "")

    def convention_gaps(self) -> list[str]:
        """What a ``test`` row lacks of its conventions: ["names no conventions"] when it names none; [] for a test
        row that names its conventions (one named without a sweep is shown "not swept", its criterion saying why,
        e.g. a setting that needs new training), for every row of another kind (their outcome is fixed or a check of
        the code) and for a test row that could not be measured (its reason starts with :data:`NOT_MEASURED`: no
        verdict to re-judge)."""
        if self.evidence != TEST or (self.reason or "").startswith(NOT_MEASURED) or self.conventions:
            return []
        return ["names no conventions"]

    @property
    def unswept(self) -> tuple[str, ...]:
        """The conventions the row names without a robustness sweep."""
        return tuple(c for c in self.conventions if c not in self.robustness)

    @property
    def headline_entry(self) -> Any:
        """The measured entry the verdict was decided on."""
        return self.measured[self.headline]

    def replace(self, **changes: Any) -> Row:
        """A checked copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Row:
        """The row of its JSON form (a results.json entry); ValueError naming what is missing or unknown."""
        if isinstance(entry, Row):
            return entry
        if not isinstance(entry, Mapping):
            raise ValueError(f"a claim entry is a dict of the row's keys; got {type(entry).__name__}")
        missing = [k for k in REQUIRED_KEYS if k not in entry]
        if missing:
            raise ValueError(f"claim entry {entry.get('id', '?')} lacks keys {missing}; it needs {list(REQUIRED_KEYS)}")
        unknown = [k for k in entry if k not in REQUIRED_KEYS + OPTIONAL_KEYS]
        if unknown:
            raise ValueError(f"claim entry {row_name(entry.get('id', '?'), entry.get('setting'))} has unknown keys "
                             f"{unknown}; a row has {list(REQUIRED_KEYS)} and optionally {list(OPTIONAL_KEYS)}")
        fields = {k: v for k, v in entry.items() if v is not None or k in REQUIRED_KEYS}
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """The JSON form results.json holds: the required keys, then each optional one that is present."""
        out: dict[str, Any] = {
            "id": self.id, "statement": self.statement, "setting": dict(self.setting),
            "measured": {k: v.to_json() if isinstance(v, Measured) else v for k, v in self.measured.items()},
            "headline": self.headline, "verdict": self.verdict, "evidence": self.evidence, "criterion": self.criterion}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.budget is not None:
            out["budget"] = self.budget.to_json()
        if self.out_of_distribution is not None:
            out["out_of_distribution"] = self.out_of_distribution.to_json()
        if self.conventions:
            out["conventions"] = list(self.conventions)
        if self.robustness:
            out["robustness"] = {k: v.to_json() for k, v in self.robustness.items()}
        if self.view_gap is not None:
            out["view_gap"] = self.view_gap.to_json()
        if self.headline_text is not None:
            out["headline_text"] = self.headline_text
        for key in ("source", "experiment", "incomplete"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out
