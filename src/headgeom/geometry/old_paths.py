"""The module paths geometry/ had before it was split into rooms (engine, layers, linalg,
invariance), kept importable for one release: ``import headgeom.geometry.readings`` gives the
module ``headgeom.geometry.engine.readings`` itself (the same object, so a patch of one is a
patch of the other). New code imports the new path or the public ``headgeom.geometry``;
``tests/test_layering.py`` checks that nothing inside geometry/ uses an old one.
"""
from __future__ import annotations

import importlib
import sys

OLD_PATHS: dict[str, str] = {
    "analysis_facts": "engine.analysis_facts", "block_dispatch": "engine.block_dispatch",
    "block_strategies": "engine.block_strategies", "discovery": "engine.discovery",
    "effective_hessian": "engine.effective_hessian", "head_cache": "engine.head_cache",
    "head_facts": "engine.head_facts", "head_function": "engine.head_function",
    "loss_curvature": "engine.loss_curvature", "loss_discovery": "engine.loss_discovery",
    "mlp_sandwich": "engine.sandwich", "mlp_structure": "engine.chain",
    "operand_scale": "engine.operand_scale", "operator_path": "engine.operator_path",
    "precision": "engine.precision", "readings": "engine.readings",
    "layer_rules": "layers", "norm_structure": "layers",
    "lanczos": "linalg.lanczos", "operators": "linalg.operators", "shifted_power": "linalg.shifted_power",
    "spectrum": "linalg.spectrum", "threshold": "linalg.threshold", "weighted_gram": "linalg.weighted_gram",
    "fisher": "invariance.fisher", "pullback_gram": "invariance.pullback_gram", "tangents": "invariance.tangents",
    "report": "cli",
}
"""old module name under headgeom.geometry -> its module now, under headgeom.geometry"""


def install() -> None:
    """Make every old path name its module (entries in ``sys.modules``; nothing is copied)."""
    for old, new in OLD_PATHS.items():
        sys.modules.setdefault(f"{__package__}.{old}", importlib.import_module(f"{__package__}.{new}"))
