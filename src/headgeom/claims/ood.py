"""The out-of-distribution flag of a claim row: the head was evaluated on inputs it was not
trained on (docs/paper.md §4 pitfall 5).

Every head headgeom trains or loads was trained on raw backbone features z. The paper's orbit
protocol feeds it z/‖z‖ instead: its first layer and its BatchNorm running statistics then see
inputs at another scale, and a BN head can map every input near one point (mean pairwise cosine
near 1 at the head). A verdict read there is a verdict on a head out of distribution, and
report.md says so beside it. A claim row that read such a head carries an
:class:`OutOfDistribution`, whose JSON form is

    out_of_distribution = {"why": str, "mean_pairwise_cosine_h": measured entry}

built by :func:`ood_flag`; a row on heads fed raw z carries none. The measurement side is
``headgeom.orbits.analyze.out_of_distribution``; the report's sentence is
``headgeom.report.markdown.ood_text``. It imports nothing heavy, so reports can be rendered without torch.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from headgeom.claims.measured import Measured

__all__ = ["L2_INPUT_WHY", "OutOfDistribution", "ood_flag"]

L2_INPUT_WHY = ("head trained on raw z but fed z/‖z‖ here (the paper's protocol): its first layer and BatchNorm "
                "running statistics see inputs at another scale")


@dataclass(frozen=True)
class OutOfDistribution:
    """Why the row's head was read out of distribution, and the mean pairwise cosine measured at its output."""

    why: str
    mean_pairwise_cosine_h: Measured

    def __post_init__(self) -> None:
        if not isinstance(self.why, str):
            raise ValueError(f"an out-of-distribution flag says why in words; got why={self.why!r}")
        if not isinstance(self.mean_pairwise_cosine_h, Measured):
            if not isinstance(self.mean_pairwise_cosine_h, Mapping) or "value" not in self.mean_pairwise_cosine_h:
                raise ValueError("an out-of-distribution flag needs the measured mean pairwise cosine at the head as a "
                                 f"measured entry {{'value', 'n', 'spread'}}; got {self.mean_pairwise_cosine_h!r}")
            object.__setattr__(self, "mean_pairwise_cosine_h",
                               Measured.from_json(self.mean_pairwise_cosine_h, "mean_pairwise_cosine_h"))

    @classmethod
    def from_json(cls, entry: Any, row_name: str = "?") -> OutOfDistribution:
        """The flag of its JSON form (module docstring); ValueError naming the row otherwise."""
        if isinstance(entry, OutOfDistribution):
            return entry
        if not isinstance(entry, Mapping) or set(entry) != {"why", "mean_pairwise_cosine_h"} \
                or not isinstance(entry.get("mean_pairwise_cosine_h"), Mapping):
            raise ValueError(f"claim row {row_name}: out_of_distribution {entry!r} must be "
                             "{'why': str, 'mean_pairwise_cosine_h': measured entry}; build it with "
                             "headgeom.claims.ood.ood_flag")
        try:
            return cls(entry["why"], entry["mean_pairwise_cosine_h"])
        except ValueError as err:
            raise ValueError(f"claim row {row_name}: {err}") from err

    def to_json(self) -> dict[str, Any]:
        return {"why": self.why, "mean_pairwise_cosine_h": self.mean_pairwise_cosine_h.to_json()}


def ood_flag(mean_pairwise_cosine_h: Measured | Mapping[str, Any], why: str = L2_INPUT_WHY) -> OutOfDistribution:
    """The ``out_of_distribution`` entry of a claim row (module docstring)."""
    return OutOfDistribution(why, mean_pairwise_cosine_h)
