"""A report written as markdown, as one self-contained HTML page: ``headgeom analyze``'s report.html is
its report.md (headgeom.orbits.report, the one home of what that report says) in the page of
headgeom.report.html_page, figures embedded as ``data:`` URIs.

Only the markdown those reports write is understood: ``#`` to ``####`` headings, pipe tables, ``- ``
lists, ``> `` quotes, fenced code, ``![alt](figures/x.png)`` on a line of its own, paragraphs; inline
``**bold**``, backtick code and ``<br>``. Everything else is text, escaped (headgeom.report.html_text).
"""
from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from headgeom.io import atomic_write_text
from headgeom.report.html_page import page
from headgeom.report.html_text import inline, png_data_uri, text
from headgeom.report.table import table_html

__all__ = ["markdown_html", "write_markdown_html"]

_HEADING = re.compile(r"^(#{1,4}) (.*)$")
_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^()\s]+)\)$")


def _figure(alt: str, rel: str, root: Path | None) -> str:
    """An image line: the PNG beside the report (a relative path inside its folder), embedded."""
    inside = not PurePosixPath(rel).is_absolute() and ".." not in PurePosixPath(rel).parts
    uri = png_data_uri(root / rel) if root is not None and inside and rel.lower().endswith(".png") else None
    if uri is None:
        return f'<p class="warn">figure {text(rel)} is not beside the report</p>'
    return f'<figure><img src="{uri}" alt="{text(alt)}"><figcaption>{text(rel)}</figcaption></figure>'


def markdown_html(markdown: str, root: str | os.PathLike | None = None) -> str:
    """The HTML body of a report's markdown; figures are read from ``root`` (the report's folder)."""
    root = Path(root) if root is not None else None
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            out.append(f"<pre>{text(chr(10).join(lines[i + 1:end]))}</pre>")
            i = end + 1
            continue
        block = [line]
        kind = ("heading" if _HEADING.match(line) else "image" if _IMAGE.match(stripped) else
                "table" if stripped.startswith("|") else "list" if stripped.startswith("- ") else
                "quote" if stripped.startswith(">") else "paragraph")
        i += 1
        if kind in ("table", "list", "quote", "paragraph"):
            while i < len(lines) and lines[i].strip() and _continues(kind, lines[i].strip()):
                block.append(lines[i])
                i += 1
        out.append(_block(kind, block, root))
    return "\n".join(out)


def _continues(kind: str, stripped: str) -> bool:
    """Whether a non-blank line carries on a block of ``kind``."""
    if kind == "table":
        return stripped.startswith("|")
    if kind == "list":
        return not (_HEADING.match(stripped) or stripped.startswith(("|", "```")) or _IMAGE.match(stripped))
    if kind == "quote":
        return stripped.startswith(">")
    return not (_HEADING.match(stripped) or stripped.startswith(("|", "- ", ">", "```")) or _IMAGE.match(stripped))


def _block(kind: str, block: list[str], root: Path | None) -> str:
    if kind == "heading":
        hashes, title = _HEADING.match(block[0]).groups()
        return f"<h{len(hashes)}>{inline(title)}</h{len(hashes)}>"
    if kind == "image":
        alt, rel = _IMAGE.match(block[0].strip()).groups()
        return _figure(alt, rel, root)
    if kind == "table":
        return table_html("\n".join(block))
    if kind == "list":
        items: list[str] = []
        for ln in block:  # a line without "- " continues the item above it
            if ln.strip().startswith("- ") or not items:
                items.append(ln.strip().removeprefix("- "))
            else:
                items[-1] += " " + ln.strip()
        return "<ul>" + "".join(f"<li>{inline(it)}</li>" for it in items) + "</ul>"
    if kind == "quote":
        return "<blockquote>" + inline(" ".join(ln.strip().lstrip(">").strip() for ln in block)) + "</blockquote>"
    return "<p>" + inline(" ".join(ln.strip() for ln in block)) + "</p>"


def write_markdown_html(path: str | os.PathLike, markdown: str, title: str) -> Path:
    """Write the page of ``markdown`` to ``path`` atomically, its figures read from (and relative to)
    its folder."""
    path = Path(path)
    return atomic_write_text(path, page(title, markdown_html(markdown, path.parent)))
