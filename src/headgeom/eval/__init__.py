"""Evaluation on frozen features (claim C12 of docs/paper.md).

Weighted kNN, a linear probe and (on request) an MLP probe for classes, the paper's 4-way rotation probe, and RankMe /
covariance statistics, on the backbone output z and after every head layer (a guillotine
sweep; the points are described in :mod:`headgeom.eval.features`). ``evaluate_run`` rebuilds
a ``headgeom train`` run; ``headgeom eval RUN`` (:mod:`headgeom.eval.cli`) writes RUN/eval.json.

Data flows one way: data → backbone → head → (frozen features) → these probes → report.
"""
from headgeom.eval.evaluate import EvalConfig, evaluate_model, evaluate_run, subsample
from headgeom.eval.features import (extract_features, feature_points, head_features, point_modules,
                                    point_names)
from headgeom.eval.knn import knn_accuracy, knn_predict, knn_scores
from headgeom.eval.linear_probe import (LinearProbe, LinearProbeConfig, fit_linear_probe,
                                        linear_probe_accuracy)
from headgeom.eval.mlp_probe import MLPProbe, MLPProbeConfig, fit_mlp_probe, mlp_probe_accuracy
from headgeom.eval.rankme import (RANKME_EPS, covariance_condition, rankme, representation_stats,
                                  spread_l2, total_variance_l2)
from headgeom.eval.rotation import ROTATIONS, rotate_images, rotation_dataset, rotation_probe

__all__ = [
    "EvalConfig", "LinearProbe", "LinearProbeConfig", "MLPProbe", "MLPProbeConfig", "RANKME_EPS", "ROTATIONS",
    "covariance_condition", "evaluate_model", "evaluate_run", "extract_features",
    "feature_points", "fit_linear_probe", "fit_mlp_probe", "head_features", "knn_accuracy", "knn_predict", "knn_scores",
    "linear_probe_accuracy", "mlp_probe_accuracy", "point_modules", "point_names", "rankme", "representation_stats",
    "rotate_images", "rotation_dataset", "rotation_probe", "spread_l2", "subsample",
    "total_variance_l2",
]
