"""report.html in a real browser: Debian's chromium, headless, loads the file (file://) with a filter in
the URL fragment, runs the page's script (virtual time: the page is idle before the DOM is read, no
wall-clock wait), and the DOM it dumps shows exactly the rows that match, the claims left without one
hidden, and no script error or blocked load in the console. CI installs chromium (.ci/run); without it
these tests skip."""
import json
import shutil
import subprocess
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from headgeom.report.html import write_html

QUICK = Path(__file__).resolve().parents[2] / "docs" / "results" / "quick.json"
CHROMIUM = shutil.which("chromium")
AUTHORS = "authors' runs, re-judged"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium, "
                                                          "as .ci/run does): the HTML report's browser test needs it")


class Dom(HTMLParser):
    """The rows, claims, counter text and body attributes of a dumped DOM."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.rows: list[dict] = []
        self.claims: list[dict] = []
        self.body: dict = {}
        self.output = ""
        self._claim: str | None = None
        self._in_output = False
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details" and a.get("class") == "claim":
            self._claim = a["data-claim"]
            self.claims.append(a)
        elif tag == "tr" and a.get("class") == "row":
            self.rows.append(dict(a, claim=self._claim))
        elif tag == "body":
            self.body = a
        self._in_output = tag == "output"

    def handle_endtag(self, tag):
        self._in_output = False

    def handle_data(self, data):
        if self._in_output:
            self.output += data


def browse(path: Path, fragment: str, profile: Path) -> tuple[Dom, str]:
    """(the DOM after the page's scripts ran, the console) of ``path#fragment`` in headless chromium."""
    url = path.resolve().as_uri() + ("#" + fragment if fragment else "")
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",  # root, CI containers
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=300)  # a guard against a hung browser, not a measure
    assert done.returncode == 0, done.stderr[-2000:]
    console = "\n".join(line for line in done.stderr.splitlines() if ":CONSOLE" in line)
    return Dom(done.stdout), console


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results = json.loads(QUICK.read_text())
    path = write_html(tmp_path_factory.mktemp("html") / "report.html", results)
    return path, results["claims"]


def _expected(claims: list[dict], **want: str) -> list[tuple]:
    source = {"authors": lambda c: c.get("source") == AUTHORS, "ours": lambda c: c.get("source") != AUTHORS}
    keep = [c for c in claims if all(c[k] == v for k, v in want.items() if k != "source")
            and ("source" not in want or source[want["source"]](c))]
    return sorted((c["id"], c["evidence"], c["verdict"]) for c in keep)


@pytest.mark.parametrize("want", [{"verdict": "not supported"},
                                  {"evidence": "test", "verdict": "supported", "source": "authors"},
                                  {"evidence": "identity"},
                                  {"source": "ours", "verdict": "inconclusive"}])
def test_a_filter_in_the_fragment_shows_exactly_the_matching_rows(report, tmp_path, want):
    path, claims = report
    dom, console = browse(path, urllib.parse.urlencode(want, quote_via=urllib.parse.quote), tmp_path / "profile")
    assert dom.body.get("data-filtered") == "ready" and console == ""  # the script ran; nothing blocked or raised
    shown = [r for r in dom.rows if "hidden" not in r]
    assert sorted((r["claim"], r["data-evidence"], r["data-verdict"]) for r in shown) == _expected(claims, **want)
    assert 0 < len(shown) < len(claims)  # the filter left some rows and hid others: it could have failed
    assert dom.output == f"{len(shown)} of {len(claims)} rows shown"
    with_rows = {r["claim"] for r in shown}
    assert {c["data-claim"] for c in dom.claims if "hidden" not in c} == with_rows


def test_without_a_filter_every_row_and_claim_is_shown_and_a_claim_opens_by_name(report, tmp_path):
    path, claims = report
    dom, console = browse(path, "", tmp_path / "profile")
    assert dom.body.get("data-filtered") == "ready" and console == ""
    assert len(dom.rows) == len(claims) and not any("hidden" in r for r in dom.rows + dom.claims)
    assert dom.output == f"{len(claims)} of {len(claims)} rows shown"
    assert not any("open" in c for c in dom.claims)
    dom, _ = browse(path, "open=C4&verdict=bogus", tmp_path / "profile")  # an unknown value filters nothing
    assert [c["data-claim"] for c in dom.claims if "open" in c] == ["C4"]
    assert not any("hidden" in r for r in dom.rows)
