"""Every reference in the repository's code and docs points inside the repository.

Scanned: src/, tests/, docs/, benchmarks/, tools/, README.md, BENCHMARKS.md, CHANGELOG.md and mkdocs.yml
(text files).
Refused: citations of files that live outside the repository (the paper notes, the style notes,
the method notes, the shared folder next to a checkout, absolute machine paths), issue numbers of
this project's tracker (an upstream project's issue is cited by its full URL), relative markdown
links and references to a markdown file under docs/ (with or without an #anchor) whose file or
anchor does not exist, paths of repository files (under src/headgeom/, tests/, benchmarks/,
tools/) that do not exist, and section citations (paper.md followed by § and a number) of a
section docs/paper.md does not have.

The forbidden names and the synthetic references below are spelled in pieces (adjacent string
literals) so that this file passes its own scan.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED_DIRS = ("src", "tests", "docs", "benchmarks", "tools")
SCANNED_FILES = ("README.md", "BENCHMARKS.md", "CHANGELOG.md", "mkdocs.yml")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".json", ".yaml", ".yml", ""}

OUTSIDE = {
    "the paper notes (cite docs/paper.md)": re.compile(r"\bPAPER" r"\.md"),
    "the style notes (cite docs/design.md#house-rules)": re.compile(r"\bSTYLE(?:" r"\.md|\s+rule|\s*§)"),
    "the method notes (cite docs/design.md#method-interface)": re.compile(r"METHOD" r"_PROTOCOL"),
    "a folder next to the checkout": re.compile(r"\.\./" r"shared"),
    "an absolute machine path": re.compile(r"/" r"work/"),
}
ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+|(?<![\w/&#])#\d+\b")
UPSTREAM_URL = re.compile(r"https?://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS_REF = re.compile(r"(?<![\w/.])docs/[\w./-]+?\.md(?:#[\w-]+)?")
REPO_PATH = re.compile(r"(?<![\w./-])(?:src/headgeom|tests|benchmarks|tools|\.ci)/[\w./-]*\w\.(?:py|md|sh|toml)")
PLACEHOLDER = re.compile(r"cN_|NAME|XXX|[<>{}*]")  # a path pattern such as experiments/cN_name.py
SECTION_CITE = re.compile(r"paper\.md,?\s*§\s*\d+(?:\.\d+)*(?:\s*(?:,\s*§|and\s*§|[-–]\s*§?)\s*\d+(?:\.\d+)*)*")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$", re.M)
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
SECTION_NUMBER = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")


def scanned_files(root: Path = ROOT) -> list[Path]:
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for d in SCANNED_DIRS:
        for path in sorted((root / d).rglob("*")):
            if (path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
                    and not any(part.endswith(".egg-info") for part in path.parts)  # pip's build output
                    and not any(part.startswith(".") for part in path.relative_to(root).parts)):
                files.append(path)
    return files


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Explicit ``<a id=...>`` anchors and the heading anchors GitHub generates."""
    return set(EXPLICIT_ANCHOR.findall(markdown)) | {slug(h) for _, h in HEADING.findall(markdown)}


def sections(markdown: str) -> set[str]:
    """Section numbers of the headings ('## 1. Objects' -> '1', '### 4.2 Signs' -> '4.2')."""
    out = set()
    for _, heading in HEADING.findall(markdown):
        m = SECTION_NUMBER.match(heading + " ")
        if m:
            out.add(m.group(1))
    return out


def _target_problem(target: Path, anchor: str | None, root: Path) -> str | None:
    if not target.resolve().is_relative_to(root.resolve()):
        return f"{target} lies outside the repository"
    if not target.exists():
        return f"{target.relative_to(root) if target.is_relative_to(root) else target} does not exist"
    if anchor and target.suffix == ".md" and anchor not in anchors(target.read_text(encoding="utf-8")):
        return f"{target.relative_to(root)} has no anchor #{anchor}"
    return None


def check_text(text: str, path: Path, root: Path = ROOT) -> list[str]:
    """Problems of one file's text as 'path:line: what'; ``path`` locates relative links."""
    problems: list[str] = []
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    paper = root / "docs" / "paper.md"
    paper_sections = sections(paper.read_text(encoding="utf-8")) if paper.exists() else set()
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{rel}:{lineno}"
        for what, pattern in OUTSIDE.items():
            if pattern.search(line):
                problems.append(f"{where}: cites {what}: {line.strip()}")
        for m in ISSUE.finditer(line):
            if not UPSTREAM_URL.search(line):
                problems.append(f"{where}: issue number {m.group(0)!r} (say what is meant, or give an "
                                f"upstream issue's full URL): {line.strip()}")
        for m in DOCS_REF.finditer(line):
            ref, _, anchor = m.group(0).partition("#")
            problem = _target_problem(root / ref, anchor or None, root)
            if problem:
                problems.append(f"{where}: {m.group(0)}: {problem}")
        for m in REPO_PATH.finditer(line):
            name = m.group(0).rsplit("/", 1)[-1]
            if not PLACEHOLDER.search(name) and not (root / m.group(0)).exists():
                problems.append(f"{where}: {m.group(0)} does not exist")
        if path.suffix == ".md":
            for m in MD_LINK.finditer(line):
                link = m.group(1).strip("<>")
                if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                    continue
                ref, _, anchor = link.partition("#")
                target = (path.parent / ref) if ref else path
                problem = _target_problem(target, anchor or None, root)
                if problem:
                    problems.append(f"{where}: link {link}: {problem}")
        for m in SECTION_CITE.finditer(line):
            numbers = re.findall(r"\d+(?:\.\d+)*", m.group(0).split("§", 1)[1])
            missing = [n for n in numbers if n not in paper_sections]
            if missing:
                problems.append(f"{where}: {m.group(0)}: docs/paper.md has no section "
                                f"{', '.join('§' + n for n in missing)} (it has {sorted(paper_sections)})")
    return problems


def check_repository(root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for path in scanned_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += check_text(text, path, root)
    return problems


def test_every_reference_points_inside_the_repository():
    problems = check_repository()
    assert not problems, f"{len(problems)} references point outside the repository or nowhere:\n" + "\n".join(
        problems[:80])


def test_the_scan_covers_the_repository():
    files = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    for expected in ("README.md", "BENCHMARKS.md", "CHANGELOG.md", "mkdocs.yml", "docs/paper.md", "docs/design.md",
                     "docs/experiments.md", "docs/index.md", "docs/results.md", "docs/reference/geometry.md",
                     "src/headgeom/geometry/engine/readings.py", "tests/test_docs_references.py"):
        assert expected in files, expected


# ---- the checker itself, on synthetic text (each must be caught, so the scan can fail) ----------

@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paper.md").write_text(
        '# Title\n\n## 1. Objects\n\n### 1.3 Readings\n\n<a id="c4"></a>\n### C4. Collapse\n\n'
        "## 4. Pitfalls\n\n### 4.2 Signs below the resolution\n", encoding="utf-8")
    (tmp_path / "docs" / "design.md").write_text("# Design\n\nSee [the paper](paper.md#c4).\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    return tmp_path


def problems_of(repo: Path, text: str, name: str = "src/" "mod.py") -> list[str]:
    return check_text(text, repo / name, repo)


@pytest.mark.parametrize("bad", [
    "see PAPER" ".md §4",
    '"""Schedules as pure functions (STYLE' '.md §10)."""',
    "the STYLE" " rule 9",
    "small problems (STYLE" " §3)",
    "the interface of METHOD" "_PROTOCOL.md",
    "python ../" "shared/data/make_cifar10.py DIR",
    "data under /" "work/shared/data",
    "as decided in issue" " 4 §5",
    "(Issue" " 12)",
    "fixed in #" "12",
])
def test_checker_flags_outside_references_and_issue_numbers(repo, bad):
    assert problems_of(repo, f"x = 1\n{bad}\n"), bad
    assert problems_of(repo, bad)[0].startswith("src/" "mod.py:1:")


@pytest.mark.parametrize("good", [
    "cite docs/" "paper.md §4.2 and docs/" "paper.md §1, §1.3",
    "the claim docs/" "paper.md#c4, the design docs/" "design.md",
    "dino's plain last layer (https://github.com/facebookresearch/dino/issues/189, issue 189)",
    "colour = '#1f77b4'; x[#] ; a &#8212; b",
    "docs/" "paper.md §4, pitfall 6",
    "experiment modules live in src/headgeom/experiments/cN_name.py",
])
def test_checker_accepts_references_inside_the_repository(repo, good):
    assert problems_of(repo, good) == []


@pytest.mark.parametrize("bad, what", [
    ("docs/" "paper" ".md §7", "no section §7"),
    ("docs/" "paper" ".md §1, §5", "no section §5"),
    ("docs/" "paper" ".md §4.9", "no section §4.9"),
    ("docs/" "paper.md#c12", "no anchor #c12"),
    ("docs/" "missing.md", "does not exist"),
    ("run tests/" "test_nothing.py first", "does not exist"),
    ("bash tools/" "gone.sh", "does not exist"),
])
def test_checker_flags_missing_sections_anchors_and_files(repo, bad, what):
    problems = problems_of(repo, bad)
    assert len(problems) == 1 and what in problems[0], problems


def test_checker_follows_relative_markdown_links(repo):
    assert problems_of(repo, "[ok](paper.md#c4) [ok](design.md) [web](https://example.org/x.md)",
                       "docs/" "x.md") == []
    assert "has no anchor #c9" in problems_of(repo, "[bad](paper.md#c9)", "docs/" "x.md")[0]
    assert "does not exist" in problems_of(repo, "[bad](../NOWHERE.md)", "docs/" "x.md")[0]
    assert "outside the repository" in problems_of(repo, "[bad](../../elsewhere.md)", "docs/" "x.md")[0]
    # links are markdown syntax: in a .py file the same text is not read as a link
    assert problems_of(repo, "[bad](paper.md#c9)", "src/" "mod.py") == []


def test_anchor_and_section_parsing():
    md = '## 3. The authors\' protocols\n### 3.4 Hessian tracking\n<a id="pitfall-1"></a>\n### C4. Collapse (Thm 4.1)\n'
    assert {"pitfall-1", "34-hessian-tracking", "3-the-authors-protocols", "c4-collapse-thm-41"} <= anchors(md)
    assert sections(md) == {"3", "3.4"}
