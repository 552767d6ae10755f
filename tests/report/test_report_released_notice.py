"""When the authors' released runs are not in a report, report.md and report.html say so in their
first lines, with how to add them (headgeom.report.released_notice); when they are, or when they were
not part of what ran, nothing is said."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from headgeom.cli import build_parser
from headgeom.experiments.registry import EXPERIMENTS
from headgeom.experiments.runner import _load
from headgeom.report.html import render_html
from headgeom.report.markdown import render_report
from headgeom.report.released_notice import RELEASED_ID, released_notice

QUICK = Path(__file__).resolve().parents[2] / "docs" / "results" / "quick.json"
REASON = "no copy of the authors' released results is set: ..."


def _without_released() -> dict:
    """The committed quick run, as it reads on a machine without the released files."""
    results = json.loads(QUICK.read_text(encoding="utf-8"))
    results["experiments"].pop(RELEASED_ID)
    results["claims"] = [c for c in results["claims"] if c.get("experiment") != RELEASED_ID]
    results["skipped"] = {RELEASED_ID: REASON}
    return results


def test_the_id_is_the_released_experiments():
    _load()
    assert RELEASED_ID in EXPERIMENTS and EXPERIMENTS[RELEASED_ID].available is not None


def test_both_reports_open_with_how_to_add_the_authors_runs():
    results = _without_released()
    notice = released_notice(results)
    assert "`headgeom released fetch`" in notice and f"`{results['command']}`" in notice and "seconds" in notice
    md = render_report(results).splitlines()
    assert md[0] == "# headgeom: claims report" and md[2] == notice  # the first line under the title
    page = render_html(results)
    body = page[page.index("<h1>"):]
    assert body.startswith('<h1>headgeom: claims report</h1>\n<p class="warn"><strong>The authors&#x27; released runs '
                           "are not in this report:</strong>")
    assert "<code>headgeom released fetch</code>" in body.split("</p>", 1)[0]


def test_the_commands_it_names_are_real():
    notice = released_notice(_without_released())
    for command in ("headgeom released fetch", "headgeom released fetch DIR"):
        assert f"`{command}`" in notice
        build_parser().parse_args(command.split()[1:])


@pytest.mark.parametrize("skipped", [{}, {"C10": "no checkpoints"}])
def test_nothing_is_said_when_the_authors_runs_are_there_or_were_not_asked_for(skipped):
    results = json.loads(QUICK.read_text(encoding="utf-8"))
    results["skipped"] = skipped
    assert released_notice(results) is None
    assert render_report(results).splitlines()[2].startswith("Produced by")
    assert "released runs are not in this report" not in render_html(results)
