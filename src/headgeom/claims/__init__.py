"""The rules that decide claim rows, apart from how they are rendered (docs/design.md).

- :mod:`~headgeom.claims.evidence`: the evidence kinds (``test``, ``identity``, ``premise``), the
  verdict words and their counting rules;
- :mod:`~headgeom.claims.estimates`: the ``measured`` entry of a row (value, n, spread);
- :mod:`~headgeom.claims.budget`: a training verdict's budget as a fraction of the paper's;
- :mod:`~headgeom.claims.training_verdicts`: the negative-curvature fraction, collapse escape, the
  dead head and the contrast of groups that the training experiments share;
- :mod:`~headgeom.claims.curvature_verdict`: C8's curvature row, shared by C8 and the ablation.
- :mod:`~headgeom.claims.paper_budgets`: the paper's training runs the budgets are measured against;
- :mod:`~headgeom.claims.collapse_escape`, :mod:`~headgeom.claims.estimated_curvature`,
  :mod:`~headgeom.claims.orbit_verdicts`, :mod:`~headgeom.claims.depth_trend`, :mod:`~headgeom.claims.probe_gap`:
  the rules of C5 (GRID), C8 on estimated λ_min series, C9, C11 and C12, each written once for headgeom's own
  runs and the authors' released runs re-judged;
- :mod:`~headgeom.claims.sources`: where a row's data come from (ours at a preset, or the authors' runs).

Pure functions of measured values: nothing here computes geometry, trains or draws. ``headgeom.report``
renders the rows these rules decide; nothing under ``launch/`` or ``tracking/`` imports a rule.
"""
