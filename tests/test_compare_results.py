"""tools/compare_results.py: two reproduce outputs are equal up to what differs between invocations (times,
dates, environment, the --out folder, reused cells), and any other difference is named."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from headgeom.report.html import write_html
from headgeom.report.markdown import write_report
from script_modules import tool

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return tool("compare_results")


def _write(folder: Path, results: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    write_report(folder / "report.md", results)
    write_html(folder / "report.html", results)
    return folder


def test_only_what_differs_between_invocations_is_ignored(tmp_path, capsys):
    tool = _tool()
    base = json.loads((ROOT / "docs" / "results" / "quick.json").read_text())
    again = copy.deepcopy(base)
    again.update(finished="2030-01-01T00:00:00+00:00", environment={"git_revision": "other"},
                 command=base["command"].replace("--out ", "--out /elsewhere/"))
    for e in again["experiments"].values():
        e.update(elapsed_s=1.0, cells_elapsed_s=2.0, n_reused=e["n_cells"])
    first, second = _write(tmp_path / "a", base), _write(tmp_path / "b", again)
    assert tool.compare_results(base, again) == []
    assert tool.main([str(first), str(second), "--reports"]) == 0

    changed = copy.deepcopy(again)
    changed["claims"][3]["verdict"] = "inconclusive" if base["claims"][3]["verdict"] != "inconclusive" else "supported"
    changed["experiments"]["C1"]["tables"][0][1] += " "
    diffs = tool.compare_results(base, changed)
    assert len(diffs) == 2 and diffs[0].startswith("experiments.C1.tables[0][1]")
    assert diffs[1].startswith(f"claims[3] ({base['claims'][3]['experiment']} {base['claims'][3]['id']}).verdict")
    third = _write(tmp_path / "c", changed)
    capsys.readouterr()
    assert tool.main([str(first), str(third), "--reports"]) == 1
    out = capsys.readouterr().out
    assert "report.md: " in out and "report.html: " in out  # the reports differ as the rows do
