"""The paper's training runs, one home for each (docs/paper.md §3): the budgets headgeom's own
verdicts are measured against (:mod:`headgeom.claims.budget`), and the budgets of the authors'
released runs re-judged by the same rules (headgeom.experiments.released_results)."""
from __future__ import annotations

from headgeom.claims.budget import PaperBudget

__all__ = ["COLLAPSE_GRID", "HESSIAN_TRACKING", "SIMCLR_PRETRAINING"]

COLLAPSE_GRID = PaperBudget(epochs=50, batch=512, source="docs/paper.md §3, collapse grid: 50 epochs, batch 512")
HESSIAN_TRACKING = PaperBudget(epochs=100, batch=256, source="docs/paper.md §3, Hessian tracking: 100 epochs, batch 256")
SIMCLR_PRETRAINING = PaperBudget(epochs=50, batch=256, source="docs/paper.md §3, SimCLR for the guillotine and the orbits: "
                                                              "50 epochs, batch 256")
