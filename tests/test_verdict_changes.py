"""tools/verdict_changes.py: the rows whose evidence kind or verdict differ between two results files, matched by
experiment and row name, and the rows only one file has."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from script_modules import tool

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return tool("verdict_changes")


def test_changed_added_and_removed_rows_are_listed_and_equal_ones_are_not(tmp_path):
    tool = _tool()
    base = json.loads((ROOT / "docs" / "results" / "c4_paper.json").read_text())
    new = copy.deepcopy(base)
    first, second = new["claims"][0], new["claims"][1]
    assert (first["evidence"], first["verdict"]) != ("diagnostic", "not supported")
    first.update(evidence="diagnostic", verdict="not supported")  # a diagnostic's outcome is fixed: any verdict
    removed = new["claims"].pop(1)
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps(new))
    lines = tool.changes(tmp_path / "a.json", tmp_path / "b")
    assert lines[:2] == ["| experiment | row | before | after |", "|---|---|---|---|"] and len(lines) == 4
    was = f"{base['claims'][0]['evidence']}: {base['claims'][0]['verdict']}"
    assert any(line.endswith(f"| {was} | diagnostic: not supported |") for line in lines[2:])
    assert any(line.endswith(f"| {removed['evidence']}: {removed['verdict']} | - |") for line in lines[2:])
    assert second is removed
    assert tool.changes(tmp_path / "a.json", tmp_path / "a.json") == lines[:2]  # nothing changed: the header only
    assert len(tool.changes(tmp_path / "a.json", tmp_path / "a.json", every=True)) == 2 + len(base["claims"])


def test_a_missing_results_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert _tool().main([str(tmp_path / "nowhere"), str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read the results" in err and "nowhere" in err
