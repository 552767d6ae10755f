"""The page around report.html's content: its style and script, inline, and a Content Security Policy
that lets the browser load nothing but them and ``data:`` images (no network, no other file).

The script reads the filter from the URL fragment (``report.html#evidence=test&verdict=supported&
source=authors``), applies it, and keeps the fragment in step with the filter form, so a filtered view
is a link; ``open=C4`` in the fragment opens that claim. Filtering hides (``hidden``) the claim rows
(``tr.row``, carrying ``data-evidence``, ``data-verdict``, ``data-source``) that do not match and the
claims (``details.claim``) left without a matching row, and says in each claim's summary line how many
of its rows match. Without the script
every row is shown and the form stays hidden.
"""
from __future__ import annotations

import base64
import hashlib

from headgeom.report.html_text import text

__all__ = ["FILTERS", "page"]

FILTERS = ("evidence", "verdict", "source")
"""The row fields the page filters by (the ``data-*`` attributes of a ``tr.row`` and the fragment's keys)."""

STYLE = """
:root { color-scheme: light; --line: #d0d4da; --muted: #5b6270; --ok: #1d7a3e; --no: #b3261e; --undecided: #7a6a1d; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px;
  padding: 0 1.2em 3em; color: #1c1f24; }
h1 { font-size: 1.6em; margin: 0.8em 0 0.3em; } h2 { margin-top: 1.6em; } h3 { margin-top: 1.4em; }
code, pre { font: 0.9em ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f4f5f7; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
.muted { color: var(--muted); } .warn { color: var(--no); font-weight: 600; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
th, td { border: 1px solid var(--line); padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
th { background: #f0f2f5; } .scroll { overflow-x: auto; max-width: 100%; }
form.filters { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 0.6em 0;
  z-index: 2; display: flex; flex-wrap: wrap; gap: 1em; align-items: center; }
form.filters label { font-weight: 600; } form.filters select { margin-left: 0.3em; }
.grid > span { overflow-wrap: anywhere; }
.grid { display: grid; grid-template-columns: 4.2em minmax(12em, 2fr) minmax(9em, 1.2fr) minmax(12em, 1.6fr)
  minmax(12em, 1.6fr); gap: 0 0.8em; }
.head { font-weight: 600; border-bottom: 2px solid var(--line); padding: 0.3em 0; }
details.claim { border-bottom: 1px solid var(--line); }
details.claim > summary { cursor: pointer; list-style: none; padding: 0.45em 0; }
details.claim > summary::-webkit-details-marker { display: none; }
details.claim > summary .id::before { content: "\\25B8  "; color: var(--muted); }
details.claim[open] > summary .id::before { content: "\\25BE  "; }
details.claim > summary:hover { background: #f7f8fa; }
.matches { display: block; color: var(--muted); font-size: 0.85em; }
.body { padding: 0.2em 0 1.2em 1.2em; border-left: 3px solid var(--line); margin-bottom: 0.8em; }
.v { font-weight: 600; } .v.supported { color: var(--ok); } .v.not-supported { color: var(--no); }
.v.inconclusive { color: var(--undecided); }
.c { font-weight: 600; } .c.holds { color: var(--ok); } .c.does-not-hold { color: var(--no); }
.c.holds-in-part, .c.undecided { color: var(--undecided); }
.diagnostic { border-left: 3px dashed var(--line); padding-left: 0.6em; color: var(--muted); }
.kind { display: inline-block; border: 1px solid var(--line); border-radius: 3px; padding: 0 0.3em; font-size: 0.85em; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.85em; }
"""

SCRIPT = """
(function () {
  "use strict";
  var form = document.querySelector("form.filters");
  if (!form) { return; }
  var keys = Array.prototype.map.call(form.querySelectorAll("select"), function (s) { return s.name; });
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.row"));
  var claims = Array.prototype.slice.call(document.querySelectorAll("details.claim"));
  var status = form.querySelector("output");

  function chosen() {
    var want = {};
    keys.forEach(function (k) { if (form.elements[k].value) { want[k] = form.elements[k].value; } });
    return want;
  }
  function matches(row, want) {
    return keys.every(function (k) { return !(k in want) || row.getAttribute("data-" + k) === want[k]; });
  }
  function apply() {
    var want = chosen(), active = Object.keys(want).length > 0, shown = 0;
    rows.forEach(function (row) { var ok = matches(row, want); row.hidden = !ok; if (ok) { shown += 1; } });
    claims.forEach(function (claim) {
      var own = claim.querySelectorAll("tr.row"), hit = claim.querySelectorAll("tr.row:not([hidden])").length;
      claim.hidden = active && hit === 0;
      var said = own.length === 1 ? " row matches" : " rows match";
      claim.querySelector(".matches").textContent = active && own.length ? hit + " of " + own.length + said : "";
    });
    status.textContent = shown + " of " + rows.length + " rows shown";
    var open = new URLSearchParams(location.hash.replace(/^#/, "")).get("open");
    var hash = keys.filter(function (k) { return k in want; })
      .map(function (k) { return k + "=" + encodeURIComponent(want[k]); })
      .concat(open ? ["open=" + encodeURIComponent(open)] : []).join("&");
    try { history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search); } catch (e) { }
  }
  function read() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    keys.forEach(function (k) {
      var value = params.get(k) || "", select = form.elements[k];
      var known = Array.prototype.some.call(select.options, function (o) { return o.value === value; });
      select.value = known ? value : "";
    });
    claims.forEach(function (claim) {
      if (claim.getAttribute("data-claim") === params.get("open")) { claim.open = true; }
    });
    apply();
  }
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.querySelector("button.reset").addEventListener("click", function () {
    keys.forEach(function (k) { form.elements[k].value = ""; }); apply();
  });
  window.addEventListener("hashchange", read);
  form.hidden = false;
  read();
  document.body.setAttribute("data-filtered", "ready");
}());
"""


def _source_hash(code: str) -> str:
    """The CSP source expression that allows exactly this inline style or script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii") + "'"


def policy() -> str:
    """The page's Content Security Policy: its own inline style and script (by hash), ``data:`` images,
    nothing else (no request leaves the page)."""
    return (f"default-src 'none'; img-src data:; style-src {_source_hash(STYLE)}; "
            f"script-src {_source_hash(SCRIPT)}; base-uri 'none'; form-action 'none'")


def page(title: str, body: str) -> str:
    """The whole HTML document: ``body`` (HTML, already escaped) under ``title`` (text)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{text(policy())}\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n"
            f"<script>{SCRIPT}</script>\n</body></html>\n")
