"""Text of the results as HTML fragments for report.html (headgeom.report.html): every string is
escaped with :func:`html.escape` first, then the few markdown marks the results' own strings carry
(``**bold**``, ``code`` in backticks, ``<br>`` line breaks inside a table cell) become tags, and the
experiments' markdown tables become HTML tables.

Marks are applied to text that is already escaped, so nothing from a results file can open a tag or
an attribute. Figures become ``data:`` URIs: report.html loads nothing from anywhere.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["inline", "png_data_uri", "table_html", "text"]

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
_BR = re.compile(r"&lt;br\s*/?&gt;", re.IGNORECASE)
_SEPARATOR = re.compile(r"^\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*$")
_PIPE = re.compile(r"(?<!\\)\|")


def text(value: object) -> str:
    """``value`` as escaped HTML text, quotes included (safe in an attribute too)."""
    return html.escape(str(value), quote=True)


def inline(value: object) -> str:
    """Escaped text with ``**bold**``, backtick code and ``<br>`` turned into tags."""
    out = _BR.sub("<br>", text(value))
    out = _CODE.sub(r"<code>\1</code>", out)
    return _BOLD.sub(r"<strong>\1</strong>", out)


def _cells(line: str) -> list[str]:
    """The cells of one markdown table line (an escaped ``\\|`` stays inside its cell)."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(line)]


def table_html(markdown: str) -> str:
    """An HTML table from a markdown pipe table (header line, separator line, rows); text that is no
    such table is kept as preformatted text."""
    lines = [ln for ln in markdown.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or not all(ln.lstrip().startswith("|") for ln in lines) or not _SEPARATOR.match(lines[1]):
        return f"<pre>{text(markdown.strip())}</pre>"
    head = "".join(f"<th>{inline(c)}</th>" for c in _cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(ln)) + "</tr>" for ln in lines[2:])
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def png_data_uri(path: Path) -> str | None:
    """``data:image/png;base64,...`` of the PNG at ``path``; None when there is no such file."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")
