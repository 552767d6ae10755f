"""No hand-typed measurement in README.md or docs/: every number on those pages is accounted for by one stated rule.

    python tools/doc_numbers.py        # print every number no rule accounts for (exit 1 if any)

tests/test_docs_numbers.py runs the same check on every page. The rule, in words (docs/results.md quotes it):

1. **Rendered or code.** Numbers inside a block a tool renders and a test checks (:data:`RENDERED`: the results
   blocks, rendered from docs/results/*.json by tools/results_block.py) are measurements from a results file.
   Numbers inside code (inline code, fenced blocks outside their ``#`` comments, link targets, HTML comments and
   tags) are commands, identifiers and arguments, not claims about a result.
2. **Names and references.** A number that is part of a name (ResNet-18, CIFAR-10, ViT-S/16, float64, L2, 2-D,
   SHA-256) or cites something (C4, §3.8, Thm 3.1, Table 5, Fig. 3, pitfall [2], a heading or list number, an
   issue, a date, a version, an arXiv id) measures nothing.
3. **What a measurement looks like.** Of the rest, a number is taken for a possible measurement when it has a
   fractional part or an exponent (0.847, 2e-11), a unit of time, memory, rate or ratio (s, min, h, GPU-hours,
   GB, %, ×, GFLOP), an approximation or spread before it (≈, ~, ±, "about"), or counts verdicts ("3
   supported"). A plain integer is a count, size, index or setting (14 runs, 3 seeds, batch 512) and passes (the
   rule's blind spot: a hand-typed integer result without a unit; reviews keep those out).
4. **Constants.** A number right after a comparison or assignment (=, <, >, ≤, ≥) or before a product sign
   (1e-10·max|λ|) is a threshold, setting or factor of a rule or a formula; so is a factor written ×0.1.
5. **Quoted from BENCHMARKS.md, checked.** A number on a line or paragraph that cites BENCHMARKS.md is a
   benchmark figure quoted from there, and must appear in BENCHMARKS.md as written.
6. **Allowed with a reason.** Every other candidate must be in :data:`ALLOWED`: (page, the text around it,
   why it is no measurement: the paper's own number quoted as such, a published number of another project, a
   setting, a size), and every entry must still match (a stale entry fails too).

Anything else is a hand-typed measurement: render it from a results file (a block of tools/results_block.py),
quote it from BENCHMARKS.md, or remove it.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs")  # README.md and every page under docs/

RENDERED = {"results": "tests/test_results_block.py", "results-summary": "tests/test_results_block.py"}
"""The blocks a tool renders, ``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->``, by NAME, with the test that checks
each against the files it is rendered from."""

PAPER = "the paper's own number, quoted as such (docs/paper.md §2 says where in the paper)"
PROTOCOL = "a setting of the paper's protocol, quoted as such (docs/paper.md §3)"
AUTHORS_LOG = "the authors' released log's own figure, quoted as such (docs/paper.md §3.8)"
ELSEWHERE = "a figure of an independent reproduction, quoted as such with its source"
SETTING = "a setting or constant of headgeom's code, a file format or a resource request, not a result"
EXPECTED = "what the theory or a rule expects (part of a criterion), not a result"
MEANING = "what a value of a quantity means (a point of its scale), not a result"
ESTIMATE = "an estimate from a stated goal, said on the page to be no measurement"
GRID = "a grid of settings (depths × seeds), not a ratio"
VERSION = "a version of headgeom"
DOWNLOAD = "the size of a published file a command downloads, not a result"

ALLOWED: tuple[tuple[str, str, str], ...] = (
    ("docs/analyze.md", "about 1: it shrinks everything alike", MEANING),
    ("docs/cluster.md", "about 16 GPU-hours expected on H200-class GPUs (a rough figure from the training stack's 5 "
                        "s/epoch goal, not a measurement)", ESTIMATE),
    ("docs/cluster.md", "one GPU, 8 cores, 32 GB and a 1-2 h limit", SETTING),
    ("docs/cluster.md", "one core, no GPU and 60 minutes", SETTING),
    ("docs/training.md", "the official archive (170 MB), md5 checked", DOWNLOAD),
    ("docs/experiments.md", "the isotropy error is ~0 at the origin", EXPECTED),
    ("docs/experiments.md", "keeps M ≈ 0", EXPECTED),
    ("docs/logging.md", "writes its log in 32 KiB pieces", SETTING),
    ("docs/logging.md", "the key it returned for the same number before 0.3", VERSION),
    ("docs/logging.md", "GeometryMonitor key before 0.3 (deprecated)", VERSION),
    ("docs/wandb.md", "in 32 KiB pieces", SETTING),
    ("docs/wandb.md", "32 KiB blocks of chunks", SETTING),
    ("docs/experiments.md", "over its last 10% of evaluations", SETTING),
    ("docs/experiments.md", "(PSD 5 % below t*, indefinite 5 % above)", SETTING),
    ("docs/experiments.md", "Over runs, 80% of them decide", SETTING),
    ("docs/experiments.md", "lr 0.05 for ViT-Tiny (it has SiLU at 0.05 only", PROTOCOL),
    ("docs/paper.md", "crop (0.2, 1) + flip", PROTOCOL),
    ("docs/paper.md", "0.01, its direction is not", MEANING),
    ("docs/paper.md", "(2×) from the start. Only runs collapsed at the start", SETTING),
    ("docs/results.md", "as the level reached and as growth (2×) from the start", SETTING),
    ("docs/paper.md", "learning rates 0.005, 0.05 and 0.5", PROTOCOL),
    ("docs/paper.md", "in 69 of 100 epochs (the most negative −6.35e-6)", PAPER),
    ("docs/paper.md", "compression 21.85× for ResNet-18 and 4015× for ViT-Tiny", PAPER),
    ("docs/paper.md", "inter-class distance also shrinks 56×", PAPER),
    ("docs/paper.md", "D_intra ratio 4.76×, class/orbit ratio 2.04 before the head and 2.50 after", PAPER),
    ("docs/paper.md", "VICReg 1.43, Barlow Twins 2.63", PAPER),
    ("docs/paper.md", "independent reproduction found DINO ViT-S 7.7, DINO ResNet-50 3.8, Barlow Twins 0.45, VICReg "
                      "0.25", ELSEWHERE),
    ("docs/paper.md", "49.1×, 57.2×, 78.5×", PAPER),
    ("docs/paper.md", "52.27 vs 37.55 (CIFAR-10, ResNet-18), 40.75 vs 34.92 (ViT-Tiny), 42.01 vs 31.19 (CIFAR-100)",
     PAPER),
    ("docs/paper.md", "multiplying the projector's Linear weights by 0.1", PROTOCOL),
    ("docs/paper.md", "at lr 0.05, 0.5 and 0.005; GELU without BN at 0.05", PROTOCOL),
    ("docs/paper.md", "random-resized crop with scale (0.2, 1)", PROTOCOL),
    ("docs/paper.md", "(0.08, 1), flip, rotation up to 45°, colour jitter (0.4, 0.4, 0.4, 0.1)", PROTOCOL),
    ("docs/paper.md", "hue ±0.4", PROTOCOL),
    ("docs/paper.md", "Gaussian blur σ 0.1–3.0", PROTOCOL),
    ("docs/paper.md", "and the orbits, in 291.66 minutes", AUTHORS_LOG),
    ("docs/paper.md", "guillotine and curvature in 951.15 minutes", AUTHORS_LOG),
    ("docs/paper.md", "the learning rates 0.05, 0.5 and 0.005 of the labels", PROTOCOL),
    ("docs/paper.md", "(about 1e-6 and below)", PAPER),
    ("docs/paper.md", "cannot resolve eigenvalues near 1e-6", PAPER),
    ("docs/paper.md", "clamping its smallest eigenvalue to 1e-7", PROTOCOL),
    ("docs/paper.md", "(about 0.5 s per 512 × 512 block)", ELSEWHERE),
    ("docs/reproduce.md", "C11 head depth 1–3 × seeds", GRID),
)
"""(page, the text around the number(s), the reason): the candidates rule 6 accepts. The text is matched against
the number's line and its neighbours with runs of white space made one, so an entry may span a line break."""

BLOCK = re.compile(r"<!--\s*(?P<name>[\w-]+):begin\s*-->.*?<!--\s*(?P=name):end\s*-->", re.S)
FENCE = re.compile(r"^(?P<fence>```|~~~)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")
HIDDEN = (re.compile(r"<!--.*?-->", re.S), re.compile(r"\]\([^)\s]*\)"), re.compile(r"<[a-zA-Z/][^>\n]*>"),
          re.compile(r"https?://\S+"))
CITES = [
    r"\bC\d+\b", r"§\s*\d+(?:\.\d+)*", r"\b(?:Thm|Theorem|Prop|Proposition|Lemma|Cor|Corollary|Def|Definition|"
    r"Eq|Equation|Sec|Section|Appendix|Table|Tables|Fig|Figure|Figs|Algorithm|Alg)\.?\s*\d+(?:\.\d+)*"
    r"(?:\s*(?:,|and|or|[-–])\s*\d+(?:\.\d+)*)*", r"\bpitfalls?\s*\[?\d+\]?(?:\s*(?:,|and|or|[-–])\s*\[?\d+\]?)*",
    r"\[\d+\]", r"^#{1,6}\s+\d+(?:\.\d+)*\.?", r"^\s*\d+\.\s", r"\b[Ii]ssues?\s*#?\d+", r"#\d+\b",
    r"\b\d{4}-\d\d-\d\d(?:T[\d:.+-]+)?", r"\b(?:19|20)\d\d\b", r"\bv?\d+\.\d+\.\d+(?:[+\w.-]*)", r"\b[vV]\d+(?:\.\d+)+",
    r"\b(?:[Vv]ersion|torch|wandb|python|Python|numpy|scipy|mkdocs|lightning)\s+\d+(?:\.\d+)+",
    r"\barXiv\s*\d{4}\.\d+"]
CITE = re.compile("|".join(f"(?:{c})" for c in CITES), re.M)
NAME = re.compile(r"\b[A-Za-z][A-Za-z_]*[-/]?\d+(?:[-/.]\d+)*[A-Za-z]*|\d+(?:-D|-d|-px|-bit|-way|-run|-epoch|"
                  r"-step|-layer|-head|-byte|-colour|-fold|-dim)\b|\b\d+(?![eE][-−+]?\d)[A-Za-z_]+\w*")
NUMBER = re.compile(r"(?<![\w.])(?P<pre>≈\s*|~\s*|±\s*|about\s+|×\s*|[-−+])?(?P<num>\d+(?:,\d{3})*(?:\.\d+)?"
                    r"(?:[eE][-−+]?\d+)?)(?P<unit>\s*(?:%|×|x\b|ms\b|s\b|sec\b|min\b|minutes?\b|h\b|hours?\b|"
                    r"GPU-hours?|core-hours?|CPU s\b|GB\b|GiB\b|MB\b|MiB\b|KiB\b|kB\b|GFLOP\w*|TFLOP\w*|s/\w+)"
                    r"|\s+(?:supported|not supported|inconclusive|holds?|fails?|undecided)\b)?")
CONSTANT_BEFORE = re.compile(r"(?:[=<>≤≥≠⪰⪯·]|<=|>=)\s*[-−]?$")
CONSTANT_AFTER = re.compile(r"^\s*(?:[·*]\s*\S|/[^\d\s])")
SETTING_BEFORE = re.compile(r"\b(?:lr|learning rates?|momentum|temperature|width|scale|probability|σ|weight decay|wd|"
                            r"rounded up by|below|above|at most|at least|every|limit of)\s*$")
LEVEL_AFTER = re.compile(r"^\s*%?\s*(?:bootstrap\s+)?(?:CI|interval|confidence)\b")
SIZE = re.compile(r"\d+\s*×\s*(?=\d)")  # a size a × b (512 × 512, 3×3), told apart from a ratio 21.85×
BENCHMARKS = "BENCHMARKS.md"


@dataclass(frozen=True)
class Candidate:
    """A number that may be a measurement: where, the number as written, and the text around it."""

    page: str
    line: int
    number: str
    context: str
    value: str = ""  # the digits of ``number``, e.g. "16" of "about 16 GPU-hours"

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.number!r} in: {self.context.strip()[:160]}"


def _blank(text: str, span: tuple[int, int]) -> str:
    """``text`` with ``span`` replaced by spaces, newlines kept (positions and line numbers stay)."""
    a, b = span
    return text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]


def prose(text: str) -> tuple[str, list[str]]:
    """(the page with everything rule 1 leaves out blanked, the names of its rendered blocks)."""
    blocks = []
    for m in list(BLOCK.finditer(text)):
        if m["name"] in RENDERED:
            blocks.append(m["name"])
            text = _blank(text, m.span())
    for m in list(FENCE.finditer(text)):  # code, but its comments are prose
        body_start = m.start("body")
        for line in re.finditer(r"[^\n]*", m["body"]):
            hash_at = re.search(r"(?:^|\s)#\s", line.group())
            end = line.start() + (hash_at.start() if hash_at else len(line.group()))
            text = _blank(text, (body_start + line.start(), body_start + end))
        text = _blank(text, (m.start(), m.start("body")))
        text = _blank(text, (m.end("body"), m.end()))
    for pattern in (INLINE_CODE, *HIDDEN):
        for m in list(pattern.finditer(text)):
            text = _blank(text, m.span())
    return text, blocks


def _is_measurement_form(m: re.Match[str]) -> bool:
    """Rule 3: a fraction, exponent, unit, approximation, spread, or a count of verdicts."""
    pre = (m["pre"] or "").strip()
    return bool(re.search(r"[.eE]", m["num"]) or m["unit"] or pre in ("≈", "~", "±", "about"))


def _is_constant(text: str, m: re.Match[str]) -> bool:
    """Rule 4: after a comparison, an assignment or a product sign, before a product or a division by a symbol
    (1e-10·max|λ|, 0.5/√k), after the name of a setting (lr 0.05, width 0.25, at most 2×), a confidence level
    (95% CI), a size (512 × 512) or a factor ×0.1."""
    before, after = text[max(0, m.start() - 24):m.start()], text[m.end(m.lastindex or 0):m.end() + 24]
    pre, unit = (m["pre"] or "").strip(), (m["unit"] or "").strip()
    return bool(CONSTANT_BEFORE.search(before) or CONSTANT_AFTER.match(text[m.end():m.end() + 6])
                or SETTING_BEFORE.search(before[-18:] if not pre else "") or LEVEL_AFTER.match(text[m.end("num"):])
                or SIZE.match(text[m.start("num"):]) or pre == "×" and not unit)


def _paragraph(text: str, pos: int) -> str:
    a = text.rfind("\n\n", 0, pos)
    b = text.find("\n\n", pos)
    return text[a + 1 if a >= 0 else 0:b if b >= 0 else len(text)]


def in_benchmarks(number: str, benchmarks: str) -> bool:
    """Whether BENCHMARKS.md writes ``number`` as a number of its own with the same value ("93" is "93.0" there,
    never the start of "0.081" or "930")."""
    value = float(number.replace(",", ""))
    return any(float(n.replace(",", "")) == value
               for n in re.findall(r"(?<![\d.])\d+(?:,\d{3})*(?:\.\d+)?(?![\d])", benchmarks))


def candidates(page: str, text: str, benchmarks: str | None = None) -> list[Candidate]:
    """The numbers of one page that rules 1-5 leave as possible hand-typed measurements (``benchmarks``: the text of
    BENCHMARKS.md, read from the repository when not given)."""
    scanned, _ = prose(text)
    for pattern in (CITE, NAME):
        for m in list(pattern.finditer(scanned)):
            scanned = _blank(scanned, m.span())
    if benchmarks is None:
        benchmarks = (ROOT / BENCHMARKS).read_text(encoding="utf-8")
    out = []
    for m in NUMBER.finditer(scanned):
        if not _is_measurement_form(m) or _is_constant(scanned, m):
            continue
        paragraph = _paragraph(text, m.start())
        if BENCHMARKS in paragraph and in_benchmarks(m["num"], benchmarks):
            continue  # rule 5: quoted from BENCHMARKS.md, found there
        line = text.count("\n", 0, m.start()) + 1
        out.append(Candidate(page, line, m.group().strip(), text.splitlines()[line - 1], m["num"]))
    return out


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every markdown page under docs/."""
    out = [root / "README.md"]
    return out + sorted((root / "docs").rglob("*.md"))


def allowed(c: Candidate, text: str, entries: tuple[tuple[str, str, str], ...] = ()) -> tuple[str, str, str] | None:
    """The entry of :data:`ALLOWED` (or ``entries``) that accepts ``c``: same page, its snippet found in the page
    around the number (on its line or across the line break the snippet spans) and holding the number."""
    lines = text.splitlines()
    around = " ".join(lines[max(0, c.line - 2):c.line + 1])
    around = " ".join(around.split())
    for entry in entries or ALLOWED:
        page, snippet, _ = entry
        if page == c.page and snippet in around and c.value in snippet:
            return entry
    return None


def unexplained(root: Path = ROOT) -> tuple[list[Candidate], list[tuple[str, str, str]]]:
    """(candidates no rule accounts for, entries of :data:`ALLOWED` that no candidate uses)."""
    used: set[tuple[str, str, str]] = set()
    left = []
    for path in pages(root):
        page = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for c in candidates(page, text):
            entry = allowed(c, text)
            if entry is None:
                left.append(c)
            else:
                used.add(entry)
    return left, [e for e in ALLOWED if e not in used]


def main() -> int:
    left, stale = unexplained()
    for c in left:
        print(f"hand-typed measurement? {c}")
    for page, snippet, _ in stale:
        print(f"ALLOWED entry matches nothing on {page}: {snippet!r}")
    return int(bool(left or stale))


if __name__ == "__main__":
    sys.exit(main())
