"""Independent float64 references for the SSL objectives, written with numpy and explicit loops.

They follow the official papers' code conventions (not headgeom's code) and share nothing with
src/headgeom/objectives: unbiased vs biased variances, N vs N − 1 denominators and the eps
placement are written out term by term.
"""
from __future__ import annotations

import math

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).sum())


def nt_xent_ref(a: np.ndarray, b: np.ndarray, t: float) -> float:
    """SimCLR: anchors are all 2N rows; positive = partner view; negatives = 2N − 2 others."""
    n = a.shape[0]
    rows = [_unit(r) for r in a] + [_unit(r) for r in b]
    total = 0.0
    for k in range(2 * n):
        pos = (k + n) % (2 * n)
        num = math.exp(float(rows[k] @ rows[pos]) / t)
        den = sum(math.exp(float(rows[k] @ rows[m]) / t) for m in range(2 * n) if m != k)
        total += -math.log(num / den)
    return total / (2 * n)


def info_nce_ref(a: np.ndarray, b: np.ndarray, t: float) -> float:
    n = a.shape[0]
    total = 0.0
    for i in range(n):
        sims = [float(_unit(a[i]) @ _unit(b[j])) / t for j in range(n)]
        total += -math.log(math.exp(sims[i]) / sum(math.exp(s) for s in sims))
    return total / n


def negative_cosine_ref(p: np.ndarray, z: np.ndarray) -> float:
    return -float(np.mean([p[i] @ z[i] / (np.linalg.norm(p[i]) * np.linalg.norm(z[i]))
                           for i in range(p.shape[0])]))


def mse_ref(u: np.ndarray, c: np.ndarray) -> float:
    return float(np.mean([0.5 * sum((u[i, j] - c[i, j]) ** 2 for j in range(u.shape[1]))
                          for i in range(u.shape[0])]))


def vicreg_ref(a, b, sim=25.0, std=25.0, cov=1.0, eps=1e-4) -> float:
    n, d = a.shape
    inv = float(np.mean((a - b) ** 2))

    def var_term(x):
        s = np.sqrt(np.var(x, axis=0, ddof=1) + eps)
        return float(np.mean(np.maximum(0.0, 1.0 - s)))

    def cov_term(x):
        c = np.cov(x, rowvar=False)  # unbiased: divides by N − 1
        return sum(c[i, j] ** 2 for i in range(d) for j in range(d) if i != j) / d

    std_loss = var_term(a) / 2 + var_term(b) / 2
    return sim * inv + std * std_loss + cov * (cov_term(a) + cov_term(b))


def barlow_ref(a, b, lambd=0.0051, eps=1e-5) -> float:
    n, d = a.shape

    def bn(x):  # BatchNorm1d(affine=False), train mode: biased variance, eps inside sqrt
        return (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0, ddof=0) + eps)

    ah, bh = bn(a), bn(b)
    loss = 0.0
    for i in range(d):
        for j in range(d):
            c_ij = sum(ah[s, i] * bh[s, j] for s in range(n)) / n
            loss += (1 - c_ij) ** 2 if i == j else lambd * c_ij ** 2
    return loss


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def dino_ref(students, teachers, center, ts=0.1, tt=0.04) -> float:
    """Loops over (teacher i, student v), v ≠ i; per pair the batch mean of the cross-entropy."""
    terms = []
    for i, t in enumerate(teachers):
        for v, s in enumerate(students):
            if v == i:
                continue
            per_sample = []
            for r in range(s.shape[0]):
                q = _softmax((t[r] - center) / tt)
                log_p = np.log(_softmax(s[r] / ts))
                per_sample.append(-float(q @ log_p))
            terms.append(np.mean(per_sample))
    return float(np.mean(terms))


def teacher_entropies_ref(teachers, center, tt=0.04) -> tuple[float, float]:
    """Mean over (view, sample) of H(q), and H of q averaged over them; nats."""
    qs = [_softmax((t[r] - center) / tt) for t in teachers for r in range(t.shape[0])]
    h = lambda p: -sum(float(x) * math.log(float(x)) for x in p if x > 0)  # noqa: E731
    return float(np.mean([h(q) for q in qs])), h(np.mean(qs, axis=0))


def mocov3_ref(q, k, t) -> float:
    """MoCo v3 builder.py ``contrastive_loss``: nn.CrossEntropyLoss over logits q̂ k̂ᵀ / T with
    labels arange(N) (one process), times 2T; a loop over queries."""
    n = q.shape[0]
    total = 0.0
    for i in range(n):
        logits = [float(_unit(q[i]) @ _unit(k[j])) / t for j in range(n)]
        top = max(logits)
        total += -(logits[i] - top - math.log(sum(math.exp(x - top) for x in logits)))
    return 2.0 * t * total / n
