"""Evaluation on frozen features (issue 4 §7): kNN, linear and rotation probes, RankMe.

Data flows one way: data → backbone → head → (frozen features) → these probes → report.
"""
from headgeom.eval.knn import knn_accuracy, knn_predict, knn_scores
from headgeom.eval.linear_probe import (LinearProbe, LinearProbeConfig, fit_linear_probe,
                                        linear_probe_accuracy)
from headgeom.eval.rankme import (RANKME_EPS, covariance_condition, rankme, representation_stats,
                                  spread_l2, total_variance_l2)

__all__ = [
    "LinearProbe", "LinearProbeConfig", "RANKME_EPS", "covariance_condition", "fit_linear_probe",
    "knn_accuracy", "knn_predict", "knn_scores", "linear_probe_accuracy", "rankme",
    "representation_stats", "spread_l2", "total_variance_l2",
]
