"""C8's ReLU/linear identity (tangential reading) on built runs: it holds only on data, reads "not checked"
without it and "fails" when M is not zero (headgeom.claims.curvature_verdict)."""
from dataclasses import dataclass

from headgeom.claims.budget import PaperBudget
from headgeom.claims.curvature_verdict import M_ZERO_TOL, curvature_claims
from headgeom.claims.evidence import IDENTITY, verdict_text


@dataclass(frozen=True)
class Config:
    rel_floor: float = 1e-10
    negative_points: float = 0.5
    majority: float = 0.8


def _run(frac, m_ratios):
    return {"frac_points_negative[tangential]": frac, "lambda_min_min[tangential]": -1.0 if frac else 0.0,
            "M_ratio_fro[tangential]": m_ratios, "dead_head": False}


def _identity(groups):
    rows = curvature_claims(Config(), groups, "tangential", {"objective": "simsiam"},
                            {"silu": "silu", "relu": "relu", "linear": "linear"}, statement="C8",
                            paper=PaperBudget(epochs=1, batch=8, source="built"))
    (row,) = [r for r in rows if r.evidence == IDENTITY]
    return row


def test_identity_holds_on_data_fails_on_nonzero_m_and_is_not_checked_without_data():
    smooth = [_run(1.0, [0.5, 0.6])]
    held = _identity({"silu": smooth, "relu": [_run(0.0, [0.0, 0.0])], "linear": [_run(0.0, [0.0])]})
    assert verdict_text(held) == "identity holds"
    broken = _identity({"silu": smooth, "relu": [_run(0.0, [0.0, 10 * M_ZERO_TOL])], "linear": [_run(0.0, [0.0])]})
    assert verdict_text(broken) == "identity fails: a bug"
    # the ablation's case: no |M|/|H| recorded for the ReLU and linear runs
    empty = _identity({"silu": smooth, "relu": [_run(0.0, [None, None])], "linear": [_run(0.0, [])]})
    assert verdict_text(empty) == "identity not checked"
    assert empty.headline == "max_M_ratio_fro[relu]" and "not checked" in empty.criterion
    # one run without data is enough to leave it unchecked
    partial = _identity({"silu": smooth, "relu": [_run(0.0, [0.0])], "linear": [_run(0.0, [None])]})
    assert verdict_text(partial) == "identity not checked" and partial.headline == "max_M_ratio_fro[linear]"
