"""Print the import arrows between headgeom's packages and their line counts (for docs/design.md).

    python tools/package_imports.py            # a markdown table, largest package first

A package is a folder of src/headgeom (or a top-level module such as io.py). An arrow A -> B means
some file of A imports from B, at the top of the file or inside a function (the second list:
local imports, which the house rules keep for heavy optional dependencies and for the commands'
late imports). Imports inside a package are not arrows. Standard library only.
"""
from __future__ import annotations

import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "headgeom"


def package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_modules(path: Path, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or ""]
        here = ["headgeom", *path.relative_to(ROOT).parts[:-1]]
        base = here[: len(here) - node.level + 1]
        return [".".join(base + ([node.module] if node.module else []))]
    return []


def scan(root: Path = ROOT) -> tuple[Counter, dict[str, set[str]], dict[str, set[str]]]:
    """(lines per package, top-level arrows, local arrows) over every .py file under ``root``."""
    lines: Counter = Counter()
    top: dict[str, set[str]] = defaultdict(set)
    local: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        package = package_of(path)
        lines[package] += len(source.splitlines())
        tree = ast.parse(source)
        top_nodes = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            for module in imported_modules(path, node):
                parts = module.split(".")
                if parts[0] != "headgeom" or len(parts) < 2 or parts[1] == package:
                    continue
                (top if id(node) in top_nodes else local)[package].add(parts[1])
    return lines, top, local


def main() -> int:
    lines, top, local = scan()
    print("| package | lines | imports (top of file) | imports inside functions only |")
    print("|---|---|---|---|")
    for package in sorted(lines, key=lambda p: (-lines[p], p)):
        only_local = sorted(local[package] - top[package])
        print(f"| {package} | {lines[package]} | {', '.join(sorted(top[package])) or '-'} | "
              f"{', '.join(only_local) or '-'} |")
    print(f"\n{sum(lines.values())} lines in {len(lines)} packages and modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
