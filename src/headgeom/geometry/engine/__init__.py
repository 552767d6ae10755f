"""The engine: H_eff = G + M exactly (docs/paper.md §1). The analysis copy of a head and its cache,
the measured facts of one analysis, the dispatch to a block strategy, the strategies, the
structured passes over a chain of layers, the matrix-free and dense paths, and the loss side
(readings, declared and discovered loss-Hessian blocks, the operand scale, the measured precision).

Built on :mod:`headgeom.geometry.layers` and :mod:`headgeom.geometry.linalg`.
"""
