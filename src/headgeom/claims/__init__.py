"""The claims core: the typed claim rows and the rules that decide them, apart from rendering (docs/design.md,
"The claims core").

Types, each checked when made, each with its JSON form (``to_json`` / ``from_json``):

- :mod:`~headgeom.claims.row`: :class:`~headgeom.claims.row.Row`, one verdict on one claim in one setting;
- :mod:`~headgeom.claims.measured`: :class:`~headgeom.claims.measured.Measured`, a value with n and spread;
- :mod:`~headgeom.claims.verdict`: :class:`~headgeom.claims.verdict.Verdict`, what a rule returns, and the
  verdict words;
- :mod:`~headgeom.claims.evidence`: the evidence kinds (``test``, ``identity``, ``premise``; one table,
  ``KINDS``) and their counting rules;
- :mod:`~headgeom.claims.budget`, :mod:`~headgeom.claims.ood`, :mod:`~headgeom.claims.robustness`: a row's
  training budget, out-of-distribution flag and verdict over a convention's values;
- :mod:`~headgeom.claims.claim`: the claims (:class:`~headgeom.claims.claim.Claim`) and their bottom lines;
- :mod:`~headgeom.claims.estimates`: the usual measured entry (mean ± std) and its one text form;
- :mod:`~headgeom.claims.sources`, :mod:`~headgeom.claims.paper_budgets`: where a row's data come from, and
  the paper's training runs the budgets are measured against.

Rules, pure functions of measured values, one module per claim: C1 :mod:`~headgeom.claims.whitening_verdict`,
C2 :mod:`~headgeom.claims.curvature_barrier`, C3 :mod:`~headgeom.claims.depth_isotropy`, C4
:mod:`~headgeom.claims.collapse_instability` and :mod:`~headgeom.claims.collapsed_states`, C5
:mod:`~headgeom.claims.relu_gap` and :mod:`~headgeom.claims.collapse_escape`, C6
:mod:`~headgeom.claims.invariance_verdict`, C7 :mod:`~headgeom.claims.fisher_rank`, C8
:mod:`~headgeom.claims.curvature_verdict` and :mod:`~headgeom.claims.estimated_curvature`, C9
:mod:`~headgeom.claims.orbit_verdicts`, C10 :mod:`~headgeom.claims.orbit_direction`, C11
:mod:`~headgeom.claims.depth_trend`, C12 :mod:`~headgeom.claims.probe_gap`; those the training experiments
share in :mod:`~headgeom.claims.training_verdicts`; the single-run standard C9, C11 and C12 judge every run
by (ours and the authors'), :mod:`~headgeom.claims.single_run`. Each is written once for headgeom's own runs and the
authors' released runs re-judged.

Nothing here computes geometry, trains or draws. ``headgeom.report`` renders the rows these rules decide;
nothing under ``launch/`` or ``tracking/`` imports a rule.
"""
