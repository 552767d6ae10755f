"""The one table type of the reports: columns, rows of cells, a title and notes, rendered as markdown
(report.md, results.json), HTML (report.html) and terminal text (wrapped at word boundaries, never cut).

Cells are text; the few marks the results' own strings carry (``**bold**``, ``code`` in backticks, ``<br>``
line breaks inside a cell) are kept in markdown, become tags in HTML (after escaping, so nothing from a
results file can open a tag) and are dropped or turned into line breaks on the terminal. In markdown a
``|`` inside a cell is escaped as ``\\|`` and a newline becomes ``<br>``. results.json stores each
experiment table as its markdown; :meth:`Table.from_markdown` reads it back.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Sequence

from headgeom.report.html_text import inline, text

__all__ = ["Table", "cell_text", "table_html", "wrap"]

_SEPARATOR = re.compile(r"^\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*$")
_PIPE = re.compile(r"(?<!\\)\|")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_MARKS = re.compile(r"\*\*|`")


def cell_text(value: Any) -> str:
    """Text safe inside a markdown table cell: ``|`` escaped, line breaks as ``<br>``."""
    return str(value).replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _line(cells: Sequence[str]) -> str:
    """One markdown table line; an empty cell is a single space between its pipes."""
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _html_cell(value: str) -> str:
    """A cell as HTML: a line break (``<br>``, or a newline as the markdown form writes it) becomes a tag."""
    return inline(value.replace("\r", "").replace("\n", "<br>"))


def _split(line: str) -> list[str]:
    """The cells of one markdown table line (an escaped ``\\|`` stays inside its cell, unescaped)."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(line)]


def wrap(value: str, width: int) -> list[str]:
    """Terminal lines of a cell at most ``width`` wide where its words allow: ``<br>`` starts a new line, marks
    are dropped, lines break between words only (a word longer than ``width`` stands on its own line whole)."""
    lines: list[str] = []
    for part in _BR.split(_MARKS.sub("", str(value))):
        lines += textwrap.wrap(part, max(width, 1), break_long_words=False, break_on_hyphens=False) or [""]
    return lines


def _longest_word(value: str) -> int:
    return max((len(w) for w in _MARKS.sub("", _BR.sub(" ", str(value))).split()), default=0)


def _natural(value: str) -> int:
    return max((len(line) for line in _BR.split(_MARKS.sub("", str(value)))), default=0)


@dataclass
class Table:
    """A table: ``columns`` (header cells), ``rows`` (one cell per column each), ``title`` and ``notes``
    (lines under it). Build it with :meth:`add`; render it with :meth:`markdown`, :meth:`html`, :meth:`text`."""

    columns: Sequence[str]
    rows: list[list[str]] = field(default_factory=list)
    title: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.columns = [str(c) for c in self.columns]
        if not self.columns:
            raise ValueError("a table needs at least one column")
        rows, self.rows = self.rows, []
        for row in rows:
            self.add(*row)

    def add(self, *cells: Any) -> Table:
        """Append one row (its cells as text); ValueError when it has not one cell per column."""
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.title or self.columns[0]!r}: a row of {len(cells)} cells under "
                             f"{len(self.columns)} columns {self.columns}")
        self.rows.append([str(c) for c in cells])
        return self

    def __len__(self) -> int:
        return len(self.rows)

    # ------------------------------------------------------------------ markdown
    def markdown(self) -> str:
        """The pipe table (header, separator, rows), then the notes after a blank line; no trailing newline."""
        lines = [_line([cell_text(c) for c in self.columns]), "|" + "---|" * len(self.columns)]
        lines += [_line([cell_text(c) for c in row]) for row in self.rows]
        return "\n".join(lines + ([""] + list(self.notes) if self.notes else []))

    @classmethod
    def from_markdown(cls, markdown: str, title: str = "") -> Table:
        """The table of a markdown pipe table (header line, separator line, rows; lines after a blank line are
        its notes); ValueError for text that is no such table."""
        head, _, rest = markdown.strip().partition("\n\n")
        lines = [ln for ln in head.splitlines() if ln.strip()]
        if len(lines) < 2 or not all(ln.lstrip().startswith("|") for ln in lines) or not _SEPARATOR.match(lines[1]):
            raise ValueError(f"not a markdown pipe table (header, separator, rows): {markdown[:80]!r}")
        columns = _split(lines[0])
        table = cls(columns, title=title, notes=[n for n in rest.splitlines() if n.strip()])
        table.rows += [_split(ln) for ln in lines[2:]]  # as written: a ragged row of an older file stays as it is
        return table

    # ------------------------------------------------------------------ HTML
    def html(self) -> str:
        """The table as HTML (every cell escaped, then its marks made tags), in a scrolling box; notes as
        paragraphs under it."""
        head = "".join(f"<th>{_html_cell(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        notes = "".join(f"<p>{inline(n)}</p>" for n in self.notes)
        return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
                + notes)

    # ------------------------------------------------------------------ terminal
    def widths(self, width: int, gap: int = 2) -> list[int]:
        """Column widths summing (with ``gap`` between columns) to at most ``width`` where the words allow:
        each column starts at its longest line and the widest is narrowed, one character at a time, down to
        its longest word."""
        cells = [self.columns] + self.rows
        column = [[r[i] if i < len(r) else "" for r in cells] for i in range(len(self.columns))]
        natural = [max(_natural(c) for c in col) for col in column]
        floor = [max(_longest_word(c) for c in col) for col in column]
        widths = list(natural)
        while sum(widths) + gap * (len(widths) - 1) > width:
            shrinkable = [i for i in range(len(widths)) if widths[i] > floor[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
        return widths

    def text(self, width: int = 100, indent: str = "", header: bool = True) -> str:
        """Terminal text: the title, the header and each row with every cell wrapped in its column, then the
        notes, lines at most ``width`` wide wherever no single word is longer (words are never cut). When the
        columns cannot stand side by side without cutting a word, each row's cells are stacked instead, the
        first at ``indent``, the others indented by two more spaces."""
        inner = width - len(indent)
        out = [indent + ln for ln in wrap(self.title, inner)] if self.title else []
        widths = self.widths(inner)
        stacked = sum(widths) + 2 * (len(widths) - 1) > inner  # side by side would cut words
        for row in ([self.columns] if header else []) + self.rows:
            if stacked:
                out += [indent + ln for ln in wrap(row[0], inner)]
                out += [indent + "  " + ln for c in row[1:] if c for ln in wrap(c, inner - 2)]
                continue
            wrapped = [wrap(c, w) for c, w in zip(row, widths)]
            for k in range(max(len(w) for w in wrapped)):
                parts = [(w[k] if k < len(w) else "").ljust(widths[i]) for i, w in enumerate(wrapped)]
                out.append((indent + "  ".join(parts)).rstrip())
        out += [indent + ln for n in self.notes for ln in wrap(n, inner)]
        return "\n".join(out)


def table_html(markdown: str) -> str:
    """An HTML table from a markdown pipe table (:meth:`Table.from_markdown`); text that is no such table is
    kept as preformatted text."""
    try:
        return Table.from_markdown(markdown).html()
    except ValueError:
        return f"<pre>{text(markdown.strip())}</pre>"
