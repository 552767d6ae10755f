"""Weighted kNN (headgeom.eval.knn) against a brute-force loop written here in numpy float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.eval.knn import knn_accuracy, knn_predict, knn_scores


def brute_force_knn(train: np.ndarray, labels: np.ndarray, test: np.ndarray, k: int, t: float,
                    num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """One test point at a time: cosine to every train point, k largest, exp(s/t) votes."""
    scores = np.zeros((len(test), num_classes))
    preds = np.zeros(len(test), dtype=np.int64)
    for i, q in enumerate(test):
        sims = []
        for j, x in enumerate(train):
            cos = float(np.dot(q, x) / (math.sqrt(np.dot(q, q)) * math.sqrt(np.dot(x, x))))
            sims.append((cos, j))
        sims.sort(key=lambda s: -s[0])
        for cos, j in sims[:k]:
            scores[i, labels[j]] += math.exp(cos / t)
        best = 0
        for c in range(1, num_classes):  # lowest class wins a tie
            if scores[i, c] > scores[i, best]:
                best = c
        preds[i] = best
    return scores, preds


@pytest.mark.parametrize("k,t", [(1, 0.1), (7, 0.1), (25, 0.5), (60, 0.07)])
def test_matches_brute_force(k, t):
    rng = np.random.default_rng(k)
    c = 4
    centres = rng.normal(size=(c, 6))
    y_train = rng.integers(0, c, 60)
    y_test = rng.integers(0, c, 23)
    x_train = centres[y_train] + 1.3 * rng.normal(size=(60, 6))
    x_test = centres[y_test] + 1.3 * rng.normal(size=(23, 6))
    x_train *= rng.uniform(0.1, 10, size=(60, 1))  # cosine: scale must not matter
    scores_ref, preds_ref = brute_force_knn(x_train, y_train, x_test, k, t, c)
    got = knn_scores(torch.from_numpy(x_train), torch.from_numpy(y_train),
                     torch.from_numpy(x_test), k=k, temperature=t, num_classes=c,
                     chunk_size=5)[k]
    np.testing.assert_allclose(got.double().numpy(), scores_ref, rtol=2e-5, atol=0)
    preds = knn_predict(torch.from_numpy(x_train), torch.from_numpy(y_train),
                        torch.from_numpy(x_test), k=k, temperature=t, num_classes=c)
    assert preds.tolist() == preds_ref.tolist()
    acc = knn_accuracy(torch.from_numpy(x_train), torch.from_numpy(y_train),
                       torch.from_numpy(x_test), torch.from_numpy(y_test), k=k, temperature=t)
    assert acc[k] == pytest.approx(float((preds_ref == y_test).mean()))


def test_several_k_in_one_pass_equal_separate_calls():
    g = torch.Generator().manual_seed(0)
    xtr, xte = torch.randn(80, 5, generator=g), torch.randn(30, 5, generator=g)
    ytr = torch.randint(0, 3, (80,), generator=g)
    both = knn_scores(xtr, ytr, xte, k=[3, 40], num_classes=3)
    for k in (3, 40):
        alone = knn_scores(xtr, ytr, xte, k=k, num_classes=3, chunk_size=7)[k]
        torch.testing.assert_close(both[k], alone)


def test_weights_beat_counts_and_ties_go_to_lowest_class():
    # query e1; class 1 has two neighbours at cos 0.6, class 0 one at cos 1.0:
    # counts say class 1, weights exp(cos/T) with T = 0.1 say class 0 (e^10 > 2 e^6).
    train = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.6, -0.8]])
    labels = torch.tensor([0, 1, 1])
    q = torch.tensor([[2.0, 0.0]])
    assert knn_predict(train, labels, q, k=3, temperature=0.1).tolist() == [0]
    # at T = 10 the weights are nearly equal and the two votes win
    assert knn_predict(train, labels, q, k=3, temperature=10.0).tolist() == [1]
    # exact tie: two training points with the same direction, one per class -> class 0
    train_tie = torch.tensor([[1.0, 1.0], [2.0, 2.0], [-1.0, 0.0]])
    labels_tie = torch.tensor([2, 1, 0])
    scores = knn_scores(train_tie, labels_tie, torch.tensor([[1.0, 1.0]]), k=2,
                        temperature=0.1, num_classes=3)[2]
    assert scores[0, 1] == scores[0, 2] and scores[0, 0] == 0
    assert knn_predict(train_tie, labels_tie, torch.tensor([[1.0, 1.0]]), k=2).tolist() == [1]


def test_error_paths():
    x, y = torch.randn(10, 4), torch.randint(0, 2, (10,))
    with pytest.raises(ValueError, match="k = 11 exceeds the number of training samples"):
        knn_predict(x, y, x, k=11)
    with pytest.raises(ValueError, match="different widths: 4 vs 3"):
        knn_predict(x, y, torch.randn(2, 3), k=3)
    with pytest.raises(ValueError, match=r"train_labels must have shape \(10,\)"):
        knn_predict(x, y[:9], x, k=3)
    with pytest.raises(ValueError, match="temperature must be positive"):
        knn_predict(x, y, x, k=3, temperature=0.0)
    with pytest.raises(ValueError, match="k must be a positive int"):
        knn_predict(x, y, x, k=0)
    with pytest.raises(ValueError, match=r"test_labels must have shape \(10,\)"):
        knn_accuracy(x, y, x, y[:3], k=3)
    with pytest.raises(ValueError, match="num_classes = 1"):
        knn_predict(x, torch.arange(10) % 2, x, k=3, num_classes=1)
