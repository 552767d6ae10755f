"""Weighted k-nearest-neighbour classification on frozen features (the standard SSL protocol).

Wu et al. 2018 (InstDisc) as implemented in DINO's ``eval_knn.py`` (Caron et al. 2021):
features are L2-normalised, similarity is the cosine s_ij = <x̂_i, x̂_j>, the k most similar
training samples vote for their class with weight exp(s_ij / T), and the prediction is the
class with the largest summed weight. Defaults k = 200, T = 0.1 (DINO, lightly).

Conventions stated here because they decide edge cases:
- vote ties (two classes with the same summed weight) go to the lowest class index
  (``torch.argmax`` returns the first maximum);
- neighbours with exactly equal similarity at the k-th place are chosen by ``torch.topk``
  (unspecified which); with continuous features this has probability zero;
- k larger than the number of training samples is an error (not silently clamped).

Test samples are processed in chunks of ``chunk_size`` rows, so the similarity matrix held
at once is (chunk_size, n_train).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["knn_accuracy", "knn_predict", "knn_scores"]


def _check(train_features: Tensor, train_labels: Tensor, test_features: Tensor,
           ks: Sequence[int], temperature: float, num_classes: int | None) -> int:
    if train_features.ndim != 2 or test_features.ndim != 2:
        raise ValueError(f"features must be 2-D (N, D); got train {tuple(train_features.shape)} "
                         f"and test {tuple(test_features.shape)}")
    if train_features.shape[1] != test_features.shape[1]:
        raise ValueError(f"train and test features have different widths: "
                         f"{train_features.shape[1]} vs {test_features.shape[1]}; extract both "
                         f"at the same feature point")
    if train_labels.shape != (train_features.shape[0],):
        raise ValueError(f"train_labels must have shape ({train_features.shape[0]},) to match "
                         f"the train features, got {tuple(train_labels.shape)}")
    if train_labels.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"train_labels must be integer class indices, got {train_labels.dtype}")
    n_train = train_features.shape[0]
    if n_train == 0:
        raise ValueError("no training samples: kNN needs a non-empty train set")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if k > n_train:
            raise ValueError(f"k = {k} exceeds the number of training samples ({n_train}); "
                             f"use k <= {n_train} (or more training images)")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r} (protocol: 0.1)")
    if int(train_labels.min()) < 0:
        raise ValueError(f"labels must be >= 0, got min {int(train_labels.min())}")
    needed = int(train_labels.max()) + 1
    if num_classes is None:
        return needed
    if num_classes < needed:
        raise ValueError(f"num_classes = {num_classes} but the labels go up to {needed - 1}")
    return num_classes


def knn_scores(train_features: Tensor, train_labels: Tensor, test_features: Tensor,
               k: int | Sequence[int] = 200, temperature: float = 0.1,
               num_classes: int | None = None, chunk_size: int = 1024) -> dict[int, Tensor]:
    """Class vote totals for each k: {k: (n_test, C)} with entries Σ_{top-k} exp(s/T)·1[y=c].

    Args:
        train_features: (n_train, D), any scale (normalised here).
        train_labels: (n_train,) int class indices.
        test_features: (n_test, D).
        k: one k or several (computed from one top-max(k) search).
        temperature: T of the weights exp(s / T).
        num_classes: C (default max label + 1).
        chunk_size: test rows per similarity block (memory is chunk_size × n_train).
    """
    ks = [k] if isinstance(k, int) else list(k)
    if not ks:
        raise ValueError("give at least one k")
    num_classes = _check(train_features, train_labels, test_features, ks, temperature,
                         num_classes)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    train = F.normalize(train_features.float(), dim=1)
    test = F.normalize(test_features.float(), dim=1).to(train.device)
    labels = train_labels.long().to(train.device)
    kmax = max(ks)
    out = {kk: [] for kk in ks}
    for start in range(0, test.shape[0], chunk_size):
        sim = test[start:start + chunk_size] @ train.T  # (b, n_train)
        top_sim, top_idx = sim.topk(kmax, dim=1)  # sorted, largest first
        weights = (top_sim / temperature).exp()  # (b, kmax)
        top_labels = labels[top_idx]  # (b, kmax)
        for kk in ks:
            votes = weights.new_zeros(weights.shape[0], num_classes)
            out[kk].append(votes.scatter_add_(1, top_labels[:, :kk], weights[:, :kk]))
    return {kk: (torch.cat(v) if v else test.new_zeros(0, num_classes)) for kk, v in out.items()}


def knn_predict(train_features: Tensor, train_labels: Tensor, test_features: Tensor,
                k: int = 200, temperature: float = 0.1, num_classes: int | None = None,
                chunk_size: int = 1024) -> Tensor:
    """Predicted classes (n_test,) by weighted vote; vote ties go to the lowest class."""
    scores = knn_scores(train_features, train_labels, test_features, k, temperature,
                        num_classes, chunk_size)[k]
    return scores.argmax(dim=1)


def knn_accuracy(train_features: Tensor, train_labels: Tensor, test_features: Tensor,
                 test_labels: Tensor, k: int | Sequence[int] = 200, temperature: float = 0.1,
                 num_classes: int | None = None, chunk_size: int = 1024) -> dict[int, float]:
    """Top-1 accuracy in [0, 1] for each k: {k: accuracy}."""
    if test_labels.shape != (test_features.shape[0],):
        raise ValueError(f"test_labels must have shape ({test_features.shape[0]},) to match "
                         f"the test features, got {tuple(test_labels.shape)}")
    if test_features.shape[0] == 0:
        raise ValueError("no test samples: accuracy is undefined")
    if num_classes is None:
        num_classes = int(max(int(train_labels.max()), int(test_labels.max()))) + 1
    scores = knn_scores(train_features, train_labels, test_features, k, temperature,
                        num_classes, chunk_size)
    truth = test_labels.long()
    return {kk: float((s.argmax(dim=1).cpu() == truth.cpu()).double().mean())
            for kk, s in scores.items()}
