"""The shared tag scheme (headgeom.tags): the rule on hand-written examples, and docs/logging.md's
table is the one the code renders (so the page cannot drift from what the loggers write)."""
from __future__ import annotations

from pathlib import Path

import pytest

from headgeom.tags import table_markdown, tag, tagged

DOC = Path(__file__).resolve().parents[1] / "docs" / "logging.md"


@pytest.mark.parametrize("key, name", [
    ("heff_ambient_mean_lambda_min", "headgeom/ambient/lambda_min"),
    ("heff_tangential_mean_M_ratio_fro", "headgeom/tangential/M_ratio_fro"),
    ("heff_ambient_sum_lambda_max", "headgeom/ambient_sum/lambda_max"),
    ("heff_tangential_mean_op_lambda_min", "headgeom/tangential/op_lambda_min"),
    ("heff_ambient_sum_op_iterations", "headgeom/ambient_sum/op_iterations"),
    ("rankme_z", "headgeom/stats/rankme_z"),
    ("spread_reference", "headgeom/stats/spread_reference"),
    ("update_ratio", "headgeom/updates/update_ratio"),
    ("loss", "train/loss"), ("lr", "train/lr"), ("grad_norm_head", "train/grad_norm_head"),
    ("teacher_entropy", "train/teacher_entropy"),  # a method's own log (DINO)
    ("heff_other_mean_lambda_min", "train/heff_other_mean_lambda_min"),  # not a reading headgeom has
])
def test_tag_rule(key, name):
    assert tag(key) == name


def test_tagged_keeps_numbers_only():
    assert tagged({"step": 3, "loss": 1, "note": "x", "flag": True, "heff_ambient_mean_floor": 1e-12}) == {
        "train/loss": 1.0, "headgeom/ambient/floor": 1e-12}


def test_docs_table_is_the_codes():
    text = DOC.read_text(encoding="utf-8")
    assert table_markdown() in text, (
        "docs/logging.md's tag table differs from headgeom.tags; regenerate it with "
        "python -c 'from headgeom.tags import table_markdown; print(table_markdown())'")
    rows = [line for line in table_markdown().splitlines()[2:] if "<" not in line.split("|")[1]]
    for row in rows:  # every concrete row is the rule applied to its key
        key, name = (cell.strip().strip("`") for cell in row.split("|")[1:3])
        assert tag(key) == name
