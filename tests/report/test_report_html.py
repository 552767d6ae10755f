"""report.html rendered from a results file headgeom wrote (docs/results/quick.json): one self-contained
page (figures as data: URIs, inline style and script allowed by hash, nothing else), every string
escaped, one filterable row per claim row. The page in a real browser: test_report_html_browser.py."""
import base64
import copy
import hashlib
import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from headgeom.report.html import render_html, write_html
from headgeom.report.markdown import render_report

QUICK = Path(__file__).resolve().parents[2] / "docs" / "results" / "quick.json"


class Page(HTMLParser):
    """Every start tag (name, attributes) in order, and the text inside <style> and <script>."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline: dict[str, list[str]] = {"style": [], "script": []}
        self._in: str | None = None
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in = tag if tag in self.inline else None
        if self._in:
            self.inline[tag].append("")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in:
            self.inline[self._in][-1] += data

    def rows(self) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == "tr" and a.get("class") == "row"]


@pytest.fixture(scope="module")
def results():
    return json.loads(QUICK.read_text())


def _png(color) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 5), color).save(buf, format="PNG")
    return buf.getvalue()


def test_one_filterable_row_per_claim_row_with_its_fields(results):
    page = Page(render_html(results))
    rows = page.rows()
    assert len(rows) == len(results["claims"]) > 0
    # by claim, in the report's order; within a claim, in results order, the diagnostic rows in a table after the rest
    by_id = {}
    for c in results["claims"]:
        by_id.setdefault(c["id"], []).append(c)
    expected = [c for cid in sorted(by_id, key=lambda s: int(s[1:]))
                for c in sorted(by_id[cid], key=lambda c: c["evidence"] == "diagnostic")]
    assert [(r["data-evidence"], r["data-verdict"], r["data-source"]) for r in rows] == [
        (c["evidence"], c["verdict"], "authors" if c.get("source") == "authors' runs, re-judged" else "ours")
        for c in expected]
    claims = [a["data-claim"] for t, a in page.tags if t == "details" and a.get("class") == "claim"]
    assert claims == sorted(by_id, key=lambda s: int(s[1:]))
    # the filter form offers exactly the values present, hidden until the script shows it
    form = next(a for t, a in page.tags if t == "form")
    assert "hidden" in form and form["class"] == "filters"
    options = [a["value"] for t, a in page.tags if t == "option" and a["value"]]
    kinds = [k for k in ("test", "identity", "premise", "diagnostic") if any(c["evidence"] == k for c in results["claims"])]
    verdicts = [v for v in ("supported", "not supported", "inconclusive")
                if any(c["verdict"] == v for c in results["claims"])]
    assert options == kinds + verdicts + ["ours", "authors"]


def test_the_page_loads_nothing_and_allows_only_its_own_style_and_script(results, tmp_path):
    path = write_html(tmp_path / "report.html", results)
    source = path.read_text()
    page = Page(source)
    for tag, attrs in page.tags:
        assert tag not in ("link", "iframe", "object", "embed", "base", "frame")
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            assert attrs.get(name) is None or attrs[name].startswith("data:"), (tag, attrs)
    assert "@import" not in source and "url(" not in "".join(page.inline["style"])
    meta = next(a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    policy = dict(d.strip().split(" ", 1) for d in meta["content"].split(";"))
    assert policy["default-src"] == "'none'" and policy["img-src"] == "data:"
    [style], [script] = page.inline["style"], page.inline["script"]

    def sha(code):
        return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"

    assert policy["style-src"] == sha(style) and policy["script-src"] == sha(script)


def test_figures_are_embedded_and_a_missing_one_is_said(results, tmp_path):
    names = [f for e in results["experiments"].values() for f in e.get("figures", [])]
    assert len(names) >= 2
    pngs = {names[0]: _png("red"), names[1]: _png("blue")}
    for name, data in pngs.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    page = Page(write_html(tmp_path / "report.html", results).read_text())
    images = {a["alt"]: a["src"] for t, a in page.tags if t == "img"}
    assert set(images) == {Path(n).stem for n in pngs}
    for name, data in pngs.items():
        uri = images[Path(name).stem]
        assert uri.startswith("data:image/png;base64,") and base64.b64decode(uri.split(",", 1)[1]) == data
    text = write_html(tmp_path / "report.html", results).read_text()
    assert f"figure {names[2]} is not beside the report" in text


def test_every_string_from_the_results_is_escaped(results):
    hostile = copy.deepcopy(results)
    row = hostile["claims"][0]
    row["statement"] = "<script>alert('s')</script> & more"
    row["criterion"] = '"><img src=x onerror=alert(1)>'
    row["setting"] = {"<b>key</b>": "**bold** `code`"}
    exp = hostile["experiments"][row["experiment"]]
    exp["notes"] = ["<iframe src=//x></iframe> **kept bold**"]
    exp["tables"] = [("<i>t</i>", "| <a> | b |\n|---|---|\n| x \\| y | <br> z |")]
    hostile["command"] = "headgeom reproduce </code><script>x()</script>"
    source = render_html(hostile)
    page = Page(source)
    assert [t for t, _ in page.tags].count("script") == 1  # only the page's own
    assert not any(t in ("iframe", "a", "i", "b") for t, _ in page.tags)
    assert not any(k.startswith("on") for _, a in page.tags for k in a)
    assert "&lt;script&gt;alert(&#x27;s&#x27;)&lt;/script&gt; &amp; more" in source
    assert "&lt;iframe src=//x&gt;&lt;/iframe&gt; <strong>kept bold</strong>" in source
    # a table's escaped pipe stays in its cell; a <br> in a cell is the one tag a results string may ask for
    assert "<td>x | y</td><td><br> z</td>" in source and "<th>&lt;a&gt;</th>" in source


def test_the_same_content_as_report_md(results):
    """What report.md says of each claim, report.html says too: its summary cells, each row's verdict
    words, criterion and headline value (rendered by the same pieces)."""
    md, page = render_report(results), render_html(results)
    for c in results["claims"]:
        assert c["criterion"].replace("|", "\\|") in md and html.escape(c["criterion"]) in page
    summary_md = md[md.index("## Summary"):md.index("## Details")]
    for line in summary_md.splitlines()[4:]:
        if not line.startswith("| **C"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for cell in cells[3:]:
            for part in cell.split("<br>"):
                assert html.escape(part.replace("\\|", "|")) in page, part


def test_claims_without_rows_and_experiments_without_claims_are_still_shown():
    """An experiment whose cells all failed sits under its own claim id; one that names no claim goes to
    its own section; no claim rows at all is said."""
    exp = {"title": "t", "statement": "s", "config": {"a": 1}, "seeds": 1, "n_cells": 1, "n_failed": 1,
           "elapsed_s": 0.5, "tables": [], "notes": [], "figures": [], "runs": "runs/X",
           "failed_cells": [{"key": "k<1>", "error": "RuntimeError: <boom>", "error_file": "runs/e.json"}],
           "errors": ["Traceback <x>"]}
    page = render_html({"preset": "quick", "claims": [], "experiments": {"C5": exp, "GRIDX": exp}})
    parsed = Page(page)
    assert [a["data-claim"] for t, a in parsed.tags if t == "details" and a.get("class") == "claim"] == ["C5"]
    assert parsed.rows() == [] and "No claim rows (see below)" in page
    assert "Experiments without claim rows</h2>" in page and "<h3>GRIDX: t</h3>" in page
    assert "RuntimeError: &lt;boom&gt;" in page and "<pre>Traceback &lt;x&gt;</pre>" in page
    assert "2 cells failed and 2 summary steps raised" in page  # the warning, as report.md words it
    assert "No claim entries were produced" in render_html({"claims": [], "experiments": {}})
