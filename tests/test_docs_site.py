"""The docs site (mkdocs.yml over docs/) builds with ``mkdocs build --strict``: a link to a page or an
anchor that does not exist, a page left out of the nav, or an API reference (``::: headgeom.x``) that
names nothing fails the build, and so this test. The two builds of a broken copy show that the check
can fail; the site is also checked to need no network (no web fonts), and to show no raw Sphinx role
of the docstrings (``:func:`x```): tools/griffe_sphinx_roles.py turns them into links or code.

MkDocs, the Material theme and mkdocstrings are the ``docs`` extra (in ``dev``, which CI installs).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = 'python -m pip install -e ".[docs]"'


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        try:
            __import__(module)
        except ImportError as error:
            pytest.fail(f"the docs site needs {module} ({error}): install the docs extra with {INSTALL}")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(root / "mkdocs.yml"), "--site-dir", str(site)],
                          capture_output=True, text=True, env=env, cwd=root)


RAW_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|meth|attr|exc|obj|const):<code>")
"""A role as a page shows it unrendered: Markdown makes ``:func:`x``` into ``:func:<code>x</code>`` (a role
quoted inside a code span, as docs/design.md shows the convention, is code and stays)."""


def _problems(out: subprocess.CompletedProcess) -> str:
    return "\n".join(line for line in out.stderr.splitlines() if not line.startswith("INFO")) or out.stderr


def test_the_docs_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    out = build(ROOT, site)
    assert out.returncode == 0, f"mkdocs build --strict failed (run it to see the page):\n{_problems(out)}"
    # the API reference is generated from the docstrings
    geometry = (site / "reference" / "geometry" / "index.html").read_text(encoding="utf-8")
    assert "headgeom.geometry.effective_hessian" in geometry and "Exact H_eff, G and M" in geometry
    # the docstrings' roles are rendered: none is left raw on any page, and documented targets are links
    raw = {page.relative_to(site).as_posix(): RAW_ROLE.findall(page.read_text(encoding="utf-8"))
           for page in site.rglob("*.html")}
    assert not {page: found for page, found in raw.items() if found}, "raw Sphinx roles on the site"
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="#headgeom\.geometry\.[^"]*effective_hessian"'
                     r"><code>effective_hessian\(\)</code></a>", geometry)  # :func:`effective_hessian`, a link
    # the root files are pages, and the docs' links to them point there
    assert (site / "BENCHMARKS" / "index.html").is_file() and (site / "CHANGELOG" / "index.html").is_file()
    assert 'href="../BENCHMARKS/' in (site / "experiments" / "index.html").read_text(encoding="utf-8")
    # offline: no web fonts or other remote assets are asked for
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


def _broken_copy(tmp_path: Path, page: str, extra: str) -> Path:
    """A copy of the site's sources with ``extra`` appended to docs/``page``."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("src", "tools", "BENCHMARKS.md", "CHANGELOG.md"):
        (root / name).symlink_to(ROOT / name)
    with open(root / "docs" / page, "a", encoding="utf-8") as f:
        f.write(extra)
    return root


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    root = _broken_copy(tmp_path, "index.md", "\n[gone](no-such-page.md) [no anchor](paper.md#no-such-anchor)\n")
    out = build(root, tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr and "no-such-anchor" in out.stderr, out.stderr


def test_an_api_reference_to_nothing_fails_the_build(tmp_path):
    root = _broken_copy(tmp_path, "reference/geometry.md", "\n::: headgeom.geometry.no_such_function\n")
    out = build(root, tmp_path / "site")
    assert out.returncode != 0 and "no_such_function" in out.stderr, out.stderr
