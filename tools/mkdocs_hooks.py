"""MkDocs hooks (mkdocs.yml `hooks:`): BENCHMARKS.md and CHANGELOG.md, which live at the repository
root, become pages of the docs site.

The docs pages link to them as GitHub renders them (``../BENCHMARKS.md`` from ``docs/``); on the site
those links are pointed at the served copies, and the root files' own links into ``docs/`` at the
pages. Every other link is left to ``mkdocs build --strict`` to check.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
ROOT_PAGES = ("BENCHMARKS.md", "CHANGELOG.md")
_TO_ROOT_PAGE = re.compile(r"\]\((?:\.\./)+(" + "|".join(re.escape(p) for p in ROOT_PAGES) + r")([#)])")
_INTO_DOCS = re.compile(r"\]\(docs/")


def on_files(files: Files, config: Any) -> Files:
    """Serve the root pages as if they were under docs/."""
    for name in ROOT_PAGES:
        files.append(File.generated(config, name, content=(ROOT / name).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links between the docs pages and the root pages, as the site lays them out."""
    depth = page.file.src_uri.count("/")
    if page.file.src_uri in ROOT_PAGES:
        return _INTO_DOCS.sub("](", markdown)
    return _TO_ROOT_PAGE.sub(lambda m: "](" + "../" * depth + m.group(1) + m.group(2), markdown)
