"""The rules that decide claim rows, apart from how they are rendered (docs/design.md).

- :mod:`~headgeom.claims.evidence`: the evidence kinds (``test``, ``identity``, ``premise``), the
  verdict words and their counting rules;
- :mod:`~headgeom.claims.estimates`: the ``measured`` entry of a row (value, n, spread);
- :mod:`~headgeom.claims.budget`: a training verdict's budget as a fraction of the paper's;
- :mod:`~headgeom.claims.training_verdicts`: the negative-curvature fraction, collapse escape, the
  dead head and the contrast of groups that the training experiments share;
- :mod:`~headgeom.claims.curvature_verdict`: C8's curvature row, shared by C8 and the ablation.

Pure functions of measured values: nothing here computes geometry, trains or draws. ``headgeom.report``
renders the rows these rules decide; nothing under ``launch/`` or ``tracking/`` imports a rule.
"""
