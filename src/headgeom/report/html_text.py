"""Text of the results as HTML fragments for report.html (headgeom.report.html): every string is
escaped with :func:`html.escape` first, then the few markdown marks the results' own strings carry
(``**bold**``, ``code`` in backticks, ``<br>`` line breaks inside a table cell) become tags (tables are
headgeom.report.table's).

Marks are applied to text that is already escaped, so nothing from a results file can open a tag or
an attribute. Figures become ``data:`` URIs: report.html loads nothing from anywhere.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["inline", "png_data_uri", "text"]

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
_BR = re.compile(r"&lt;br\s*/?&gt;", re.IGNORECASE)


def text(value: object) -> str:
    """``value`` as escaped HTML text, quotes included (safe in an attribute too)."""
    return html.escape(str(value), quote=True)


def inline(value: object) -> str:
    """Escaped text with ``**bold**``, backtick code and ``<br>`` turned into tags."""
    out = _BR.sub("<br>", text(value))
    out = _CODE.sub(r"<code>\1</code>", out)
    return _BOLD.sub(r"<strong>\1</strong>", out)


def png_data_uri(path: Path) -> str | None:
    """``data:image/png;base64,...`` of the PNG at ``path``; None when there is no such file."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")
