"""spectrum() against spectra chosen in the test and independent numpy/torch computations."""

import json

import numpy as np
import pytest
import torch

from headgeom.geometry.linalg.operators import SymmetricOperator
from headgeom.geometry.linalg.spectrum import spectrum


def _orth(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0]


def _q_diag_qt(lam, seed: int = 0) -> torch.Tensor:
    lam = torch.as_tensor(lam, dtype=torch.float64)
    Q = _orth(lam.numel(), seed)
    A = Q @ torch.diag(lam) @ Q.T
    return 0.5 * (A + A.T)


def _rand_sym(*shape, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(*shape, generator=g, dtype=torch.float64)
    return A + A.transpose(-1, -2)


def _cond_reference(lam: np.ndarray, rel_floor: float = 1e-10):
    """max|λ| / min|λ| over |λ| > rel_floor · max|λ|, written from the definition."""
    a = np.abs(lam)
    keep = a[a > rel_floor * a.max()]
    return None if keep.size == 0 else keep.max() / keep.min()


def test_dense_eigenvalues_match_the_chosen_spectrum():
    lam = np.array([-3.0, -0.5, 0.1, 0.7, 1.0, 2.5, 4.0, 9.0] * 4) + np.arange(32) * 1e-3
    s = spectrum(_q_diag_qt(lam, seed=1))
    assert s.kind == "dense" and s.n == 32 and s.method["name"] == "eigh"
    np.testing.assert_allclose(s.eigenvalues.numpy(), np.sort(lam), rtol=0, atol=1e-12)
    assert s.lambda_min == pytest.approx(lam.min(), abs=1e-12)
    assert s.lambda_max == pytest.approx(lam.max(), abs=1e-12)
    assert (s.n_negative, s.n_zero, s.n_positive) == ((lam < 0).sum(), 0, (lam > 0).sum())


def test_float32_input_is_analysed_in_float64():
    lam = np.linspace(-1.0, 2.0, 12)
    A = _q_diag_qt(lam, seed=2).float()
    s = spectrum(A)
    assert s.eigenvalues.dtype == torch.float64 and s.method["input_dtype"] == "float32"
    ref = np.linalg.eigvalsh(A.double().numpy())
    np.testing.assert_allclose(s.eigenvalues.numpy(), ref, rtol=0, atol=1e-12)


def test_floor_separates_roundoff_from_real_negative_curvature():
    lam = np.array([-1e-16, -1e-6, 0.3, 0.5, 1.0, 1.5, 2.0, 3.0])
    s = spectrum(_q_diag_qt(lam, seed=3))
    assert s.floor == pytest.approx(1e-10 * 3.0, rel=1e-10)
    assert s.n_negative == 1 and s.n_zero == 1 and s.n_positive == 6
    assert s.lambda_min == pytest.approx(-1e-6, rel=1e-6)
    # With a floor above 1e-6 · max|λ| the −1e-6 eigenvalue is no longer counted negative.
    s2 = spectrum(_q_diag_qt(lam, seed=3), rel_floor=1e-5)
    assert s2.n_negative == 0 and s2.n_zero == 2


def test_condition_number_follows_the_stated_definition():
    lam = np.array([1e-13, -1e-3, 0.02, 0.5, 4.0, -8.0])
    s = spectrum(_q_diag_qt(lam, seed=4))
    assert s.condition_number == pytest.approx(_cond_reference(lam), rel=1e-8)
    assert s.condition_number == pytest.approx(8.0 / 1e-3, rel=1e-8)  # 1e-13 is below the floor
    assert "floor" in s.condition_definition and "min|λ|" in s.condition_definition
    # A singular sample covariance (n <= d): finite, over the nonzero part, never 1e7-clamped.
    g = torch.Generator().manual_seed(5)
    X = torch.randn(4, 10, generator=g, dtype=torch.float64)
    C = X.T @ X / 4
    s_c = spectrum(C)
    ref = _cond_reference(np.linalg.eigvalsh(C.numpy()))
    assert s_c.n_zero == 6 and s_c.condition_number == pytest.approx(ref, rel=1e-6)
    zero = spectrum(torch.zeros(5, 5, dtype=torch.float64))
    assert zero.condition_number is None and zero.n_zero == 5 and zero.floor == 0.0


def test_blocks_match_per_block_eigh_and_numpy_summaries():
    blocks = _rand_sym(8, 5, 5, seed=6)
    blocks[3] = 0.0  # a dead sample: all eigenvalues zero, condition number undefined
    s = spectrum(blocks)
    assert s.kind == "blocks" and s.n_blocks == 8 and s.n == 40
    ref = np.stack([np.linalg.eigvalsh(b) for b in blocks.numpy()])  # independent, block by block
    np.testing.assert_allclose(s.eigenvalues.numpy(), ref, rtol=0, atol=1e-12)
    floor = 1e-10 * np.abs(ref).max()
    assert s.floor == pytest.approx(floor, rel=1e-12)
    per = {
        "lambda_min": ref.min(1), "lambda_max": ref.max(1),
        "n_negative": (ref < -floor).sum(1), "n_zero": (np.abs(ref) <= floor).sum(1),
        "n_positive": (ref > floor).sum(1),
    }
    for name, v in per.items():
        np.testing.assert_allclose(s.per_block[name].numpy(), v, rtol=0, atol=1e-12)
        summ = s.per_sample[name]
        assert summ["min"] == pytest.approx(v.min(), abs=1e-12)
        assert summ["median"] == pytest.approx(np.median(v), abs=1e-12)
        assert summ["max"] == pytest.approx(v.max(), abs=1e-12)
    conds = [_cond_reference(r) if np.abs(r).max() > floor else None for r in ref]
    defined = np.array([c for c in conds if c is not None])
    assert conds[3] is None and s.per_sample["condition_number"]["n_undefined"] == 1
    assert s.per_sample["condition_number"]["median"] == pytest.approx(np.median(defined), rel=1e-10)
    assert s.n_negative == (ref < -floor).sum() and s.n_zero == (np.abs(ref) <= floor).sum()
    assert s.lambda_min == pytest.approx(ref.min()) and s.lambda_max == pytest.approx(ref.max())
    assert s.condition_number == pytest.approx(_cond_reference(ref.ravel()), rel=1e-10)


def test_norm_ratios_dense_against_direct_matrix_norms():
    G, M = _rand_sym(7, 7, seed=7), 0.3 * _rand_sym(7, 7, seed=8)
    H = G + M
    s = spectrum(H, decomposition={"G": G, "M": M})
    mn = torch.linalg.matrix_norm
    for name, P in {"G": G, "M": M}.items():
        assert s.norm_ratios[name]["fro"] == pytest.approx(float(mn(P, "fro") / mn(H, "fro")), rel=1e-12)
        assert s.norm_ratios[name]["spectral"] == pytest.approx(
            np.linalg.norm(P.numpy(), 2) / np.linalg.norm(H.numpy(), 2), rel=1e-10
        )


def test_norm_ratios_blocks_stacked_and_per_sample():
    G, M = _rand_sym(6, 4, 4, seed=9), 0.1 * _rand_sym(6, 4, 4, seed=10)
    H = G + M
    r = spectrum(H, decomposition={"M": M}).norm_ratios["M"]
    mn = torch.linalg.matrix_norm
    Hbd, Mbd = torch.block_diag(*H), torch.block_diag(*M)  # the block-diagonal matrices themselves
    assert r["fro"] == pytest.approx(float(mn(Mbd, "fro") / mn(Hbd, "fro")), rel=1e-12)
    assert r["spectral"] == pytest.approx(float(mn(Mbd, 2) / mn(Hbd, 2)), rel=1e-10)
    per_fro = np.array([float(mn(m, "fro") / mn(h, "fro")) for m, h in zip(M, H)])
    per_sp = np.array([np.linalg.norm(m.numpy(), 2) / np.linalg.norm(h.numpy(), 2) for m, h in zip(M, H)])
    for key, v in (("fro", per_fro), ("spectral", per_sp)):
        got = r["per_sample"][key]
        assert (got["min"], got["median"], got["max"]) == pytest.approx((v.min(), np.median(v), v.max()), rel=1e-10)


def test_operator_spectrum_uses_lanczos_at_both_ends():
    lam = np.concatenate([[-6.0, -5.5], np.linspace(-2.0, 3.0, 296), [7.0, 8.0]])
    A = _q_diag_qt(lam, seed=11)
    M = 0.2 * _rand_sym(300, 300, seed=12)
    s = spectrum(SymmetricOperator.from_dense(A), k=3, decomposition={"M": SymmetricOperator.from_dense(M)})
    assert s.kind == "operator" and s.method["name"] == "lanczos" and s.method["converged"]
    srt = np.sort(lam)
    np.testing.assert_allclose(s.eigenvalues.numpy(), np.r_[srt[:3], srt[-3:]], rtol=1e-9)
    assert s.lambda_min == pytest.approx(-6.0, rel=1e-10) and s.lambda_max == pytest.approx(8.0, rel=1e-10)
    assert s.n_negative is None and s.n_zero is None and s.n_positive is None
    assert s.condition_number is None  # indefinite: min|λ| is an interior eigenvalue, unknown
    sp = float(torch.linalg.matrix_norm(M, 2) / torch.linalg.matrix_norm(A, 2))
    assert s.norm_ratios["M"]["spectral"] == pytest.approx(sp, rel=1e-8)
    assert s.norm_ratios["M"]["fro"] is None
    # Definite operator: min|λ| is λ_min, so the condition number is known.
    pd = np.linspace(0.5, 5.0, 300)
    s_pd = spectrum(SymmetricOperator.from_dense(_q_diag_qt(pd, seed=13)), k=2)
    assert s_pd.condition_number == pytest.approx(10.0, rel=1e-8)


def test_small_operator_spanning_the_space_gives_exact_counts():
    lam = np.array([-2.0, -1e-16, 0.5, 1.0, 3.0])
    A = _q_diag_qt(lam, seed=14)
    s_op, s_dense = spectrum(SymmetricOperator.from_dense(A)), spectrum(A)
    assert s_op.method["exact"] and s_op.method["iterations"] == 5
    assert (s_op.n_negative, s_op.n_zero, s_op.n_positive) == (1, 1, 3)
    assert (s_op.n_negative, s_op.n_zero, s_op.n_positive) == (s_dense.n_negative, s_dense.n_zero, s_dense.n_positive)
    assert s_op.condition_number == pytest.approx(_cond_reference(lam), rel=1e-8)


def test_to_dict_is_strict_json_and_summary_has_the_headline():
    blocks = _rand_sym(3, 4, 4, seed=15)
    blocks[1] = 0.0
    for s in (
        spectrum(_rand_sym(6, 6, seed=16), decomposition={"M": _rand_sym(6, 6, seed=17)}),
        spectrum(blocks, decomposition={"M": 0.5 * blocks}),
        spectrum(SymmetricOperator.from_dense(_rand_sym(40, 40, seed=18)), k=2),
    ):
        d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
        assert d["kind"] == s.kind and d["lambda_min"] == s.lambda_min and d["floor"] == s.floor
        head = s.summary()
        json.dumps(head, allow_nan=False)
        assert {"lambda_min", "lambda_max", "n_negative", "condition_number", "method"} <= set(head)
    d = json.loads(json.dumps(spectrum(blocks).to_dict(), allow_nan=False))
    assert d["per_block"]["condition_number"][1] is None
    assert set(d["per_sample"]["lambda_min"]) == {"min", "median", "max", "n_undefined"}


def test_error_paths_say_what_and_where():
    A = _rand_sym(5, 5, seed=19)
    bad = A.clone()
    bad[0, 1] += 1e-4 * float(A.abs().max())
    with pytest.raises(ValueError, match="not symmetric"):
        spectrum(bad)
    tiny = A.clone()
    tiny[0, 1] += 1e-12 * float(A.abs().max())
    s = spectrum(tiny)  # accepted and symmetrised
    np.testing.assert_allclose(s.eigenvalues.numpy(), np.linalg.eigvalsh(A.numpy()), atol=1e-10)
    nan = A.clone()
    nan[2, 3] = nan[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"2 non-finite entries.*\(2, 3\)"):
        spectrum(nan)
    blocks = _rand_sym(4, 3, 3, seed=20)
    blocks[2, 0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"1 non-finite entries.*blocks \[2\]"):
        spectrum(blocks)
    with pytest.raises(ValueError, match="square"):
        spectrum(torch.zeros(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="square"):
        spectrum(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating"):
        spectrum(torch.eye(3, dtype=torch.int64))
    with pytest.raises(TypeError, match="spectrum expects"):
        spectrum([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="rel_floor"):
        spectrum(A, rel_floor=-1.0)
    with pytest.raises(ValueError, match=r"part 'M'.*shape \(5, 5\)"):
        spectrum(A, decomposition={"M": torch.zeros(4, 4, dtype=torch.float64)})
    with pytest.raises(TypeError, match="same kind as x"):
        spectrum(SymmetricOperator.from_dense(A), decomposition={"M": A})
    with pytest.raises(TypeError, match="dict of named parts"):
        spectrum(A, decomposition=[A])
