"""The packages' layering: data flows up from the model side through runs to the experiments,
never back down (docs/design.md, "Packages and their import arrows").

Every import statement is read with ast, at the top of a file and inside functions alike, and so
are the module names given to importlib.import_module, so a late import cannot hide an arrow.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "headgeom"

BELOW_EXPERIMENTS = ("train", "eval", "orbits", "checkpoints", "geometry", "methods", "data", "augment", "claims",
                     "heads", "objectives", "backbones", "runs")
"""Packages that experiments are built from: none of them may import headgeom.experiments."""

BELOW_RUNS = ("train", "eval", "orbits", "checkpoints", "experiments")
"""What runs/ sits beneath: the run layer is read by these and imports none of them (checkpoints
reads runs through checkpoints/own_runs.py; the safe unpickler both use is runs/safe_load.py)."""


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``: ``import a.b``, ``from a import b``
    (as a.b too, since b may be a module), relative imports resolved, and string arguments of
    ``importlib.import_module``/``import_module``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ["headgeom", *path.relative_to(SRC).parts[:-1]]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def arrows_into(packages: tuple[str, ...], targets: tuple[str, ...]) -> list[str]:
    """``file:line imports module`` for every import from a file under ``packages`` into one of ``targets``."""
    bad = []
    for name in packages:
        for path in sorted((SRC / name).rglob("*.py")):
            for line, module in imported_modules(path):
                parts = module.split(".")
                if parts[0] == "headgeom" and len(parts) > 1 and parts[1] in targets:
                    bad.append(f"{path.relative_to(SRC.parent)}:{line} imports {module}")
    return sorted(set(bad))


@pytest.mark.parametrize("name", BELOW_EXPERIMENTS + BELOW_RUNS)
def test_the_layered_packages_exist(name):
    # a renamed package would otherwise make the checks below pass on nothing
    assert (SRC / name / "__init__.py").is_file(), f"headgeom.{name} is gone: update BELOW_* in this test"


def test_nothing_below_experiments_imports_them():
    bad = arrows_into(BELOW_EXPERIMENTS, ("experiments",))
    assert not bad, "imports running back up into headgeom.experiments:\n" + "\n".join(bad)


def test_only_the_command_line_imports_the_experiments():
    # experiments sit on top: a measurement, table or figure another package needs lives below them
    outside = tuple(sorted(p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                           and p.name != "experiments"))
    modules = [p for p in SRC.glob("*.py") if p.name != "cli.py"]
    bad = arrows_into(outside, ("experiments",)) + [
        f"{path.relative_to(SRC.parent)}:{line} imports {module}" for path in modules
        for line, module in imported_modules(path) if module.split(".")[:2] == ["headgeom", "experiments"]]
    assert not bad, "imports of headgeom.experiments outside the experiments and headgeom.cli:\n" + "\n".join(bad)


def test_matplotlib_is_imported_only_by_report():
    # figures are drawn through headgeom.report (its style module holds the shared look)
    bad = [f"{path.relative_to(SRC.parent)}:{line} imports {module}" for path in sorted(SRC.rglob("*.py"))
           if path.relative_to(SRC).parts[0] != "report"
           for line, module in imported_modules(path) if module.split(".")[0] == "matplotlib"]
    assert not bad, "matplotlib imported outside headgeom.report:\n" + "\n".join(bad)


def test_runs_imports_none_of_the_packages_above_it():
    bad = arrows_into(("runs",), BELOW_RUNS)
    assert not bad, "headgeom.runs imports a package built on it:\n" + "\n".join(bad)


def test_heads_import_no_methods():
    # a head is data the methods are built from (heads -> methods, never back)
    bad = arrows_into(("heads",), ("methods",))
    assert not bad, "headgeom.heads imports headgeom.methods:\n" + "\n".join(bad)


def test_the_import_reader_sees_late_relative_and_importlib_imports(tmp_path):
    # the checks above can fail: each way of writing an import is found
    pkg = tmp_path / "headgeom" / "train"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("import os\n"
                              "def f():\n    from headgeom.experiments.runner import environment\n"
                              "def g():\n    from ..experiments import runner\n"
                              "def h():\n    import importlib\n    importlib.import_module('headgeom.experiments.c1')\n"
                              "from headgeom import experiments\n")
    globals()["SRC"], saved = tmp_path / "headgeom", SRC
    try:
        lines = {int(b.split(":")[1].split()[0]) for b in arrows_into(("train",), ("experiments",))}
    finally:
        globals()["SRC"] = saved
    assert lines == {3, 5, 8, 9}


def test_no_experiment_imports_another():
    # experiments import each other only through the machinery (registry, runner); a piece two
    # experiments share (C8's curvature verdict, judged by the activation ablation too) lives below them
    machinery = {"registry", "runner", "cli"}
    bad = []
    for path in sorted((SRC / "experiments").rglob("*.py")):
        own = path.relative_to(SRC / "experiments").parts[0].removesuffix(".py")
        for line, module in imported_modules(path):
            parts = module.split(".")
            if (parts[:2] == ["headgeom", "experiments"] and len(parts) > 2
                    and parts[2] not in machinery and parts[2] != own):
                bad.append(f"{path.relative_to(SRC.parent)}:{line} imports {module}")
    assert not bad, "experiments importing each other sideways:\n" + "\n".join(sorted(set(bad)))


FIGURE_BUILDERS = ("new_figure", "blank_figure")
"""headgeom.report.style's figure constructors: whoever calls them draws a figure."""


def figure_building(path: Path) -> list[tuple[int, str]]:
    """(line, what) for each import of a figure constructor from headgeom.report.style and each
    call of a name or attribute called like one, in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "headgeom.report.style":
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in FIGURE_BUILDERS]
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name in FIGURE_BUILDERS:
                found.append((node.lineno, f"calls {name}"))
    return found


def figures_built_outside_report() -> list[str]:
    """``file:line what`` for every figure built (or its constructor imported) outside headgeom.report."""
    return [f"{path.relative_to(SRC.parent)}:{line} {what}" for path in sorted(SRC.rglob("*.py"))
            if path.relative_to(SRC).parts[0] != "report" for line, what in figure_building(path)]


def test_only_report_builds_figures():
    # the other packages compute and hand plain data to headgeom.report.plots: each experiment's
    # figures (Summary.figures holds closures calling them), the orbit analysis's and a run's
    # tracking figures (headgeom.report.plots.orbits and .tracking)
    bad = figures_built_outside_report()
    assert not bad, "figures drawn outside headgeom.report (move them to headgeom.report.plots):\n" + "\n".join(bad)


def test_report_imports_none_of_the_packages_it_draws_for():
    # report draws what the others computed: they import it, never the other way round
    bad = arrows_into(("report",), ("experiments", "orbits", "tracking", "train"))
    assert not bad, "headgeom.report imports a package it draws for:\n" + "\n".join(bad)


def test_the_figure_reader_sees_imports_and_calls(tmp_path):
    # the check above can fail: an import, a call by name and a call through the module are found
    path = tmp_path / "m.py"
    path.write_text("from headgeom.report.style import blank_figure, series_style\n"
                    "from headgeom.report import style\n"
                    "def f():\n    return style.new_figure(1, 2)\n"
                    "def g():\n    return blank_figure()\n")
    assert figure_building(path) == [(1, "imports blank_figure"), (4, "calls new_figure"), (6, "calls blank_figure")]


def test_a_figure_built_in_any_package_but_report_is_found(tmp_path):
    # the whole tree is searched, not only headgeom.experiments; headgeom.report itself is allowed
    for name in ("orbits", "report"):
        (tmp_path / "headgeom" / name).mkdir(parents=True)
        (tmp_path / "headgeom" / name / "figures.py").write_text(
            "from headgeom.report import style\ndef f():\n    return style.new_figure()\n")
    globals()["SRC"], saved = tmp_path / "headgeom", SRC
    try:
        bad = figures_built_outside_report()
    finally:
        globals()["SRC"] = saved
    assert bad == ["headgeom/orbits/figures.py:3 calls new_figure"]


def test_claim_rules_import_nothing_that_renders_and_no_runner_imports_them():
    # verdict rules are pure functions apart from rendering: headgeom.claims imports neither report/ nor
    # matplotlib, and where cells run or geometry is tracked (launch/, tracking/) no rule is imported
    bad = arrows_into(("claims",), ("report", "experiments", "launch", "tracking", "train"))
    bad += arrows_into(("launch", "tracking"), ("claims",))
    bad += [f"{path.relative_to(SRC.parent)}:{line} imports {module}" for path in sorted((SRC / "claims").rglob("*.py"))
            for line, module in imported_modules(path) if module.split(".")[0] == "matplotlib"]
    assert not bad, "verdict rules mixed with rendering or running:\n" + "\n".join(bad)


def module_arrows(module: str, targets: tuple[str, ...]) -> list[str]:
    """``file:line imports module`` for every import from the top-level module ``module``.py into ``targets``."""
    path = SRC / f"{module}.py"
    return sorted({f"{path.relative_to(SRC.parent)}:{line} imports {name}" for line, name in imported_modules(path)
                   if name.split(".")[:1] == ["headgeom"] and len(name.split(".")) > 1
                   and name.split(".")[1] in targets})


def test_the_tag_scheme_imports_no_integration():
    # headgeom.tags holds the monitor's name table; integrations/monitor.py reads it (one way, no circle)
    bad = module_arrows("tags", ("integrations", "train"))
    assert not bad, "headgeom.tags imports a package that logs under its tags:\n" + "\n".join(bad)


def test_claims_import_no_theory_and_commands_import_nothing_of_headgeom():
    # the rules that decide claims sit below the systems they judge (a threshold they apply lives with
    # them, claims/curvature_verdict.INERT_REL_TOL), and the torch-free parsers at the bottom: the names
    # they list come from their generated vocabulary (tools/write_vocabulary.py), not from launch/ or a registry
    bad = arrows_into(("claims",), ("theory", "geometry", "objectives", "methods"))
    outside = tuple(sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file() and p.name != "commands"))
    bad += arrows_into(("commands",), outside)
    bad += [f"{path.relative_to(SRC.parent)}:{line} imports {module}" for path in sorted((SRC / "commands").rglob("*.py"))
            for line, module in imported_modules(path)
            if module.split(".")[:1] == ["headgeom"] and module.split(".")[1:2] != ["commands"] and len(module.split(".")) > 1
            and (SRC / f"{module.split('.')[1]}.py").is_file()]
    assert not bad, "upward arrows:\n" + "\n".join(bad)


# ---- geometry/: its rooms import one way (docs/design.md, "The engine: facts, strategies, cache") ----

GEOMETRY_ROOMS = {
    "linalg": ("layers", "engine", "invariance", "cli", "old_paths"),
    "layers": ("engine", "invariance", "cli", "old_paths"),
    "engine": ("invariance", "cli", "old_paths"),
    "invariance": ("layers", "engine", "cli", "old_paths"),
}
"""room -> what it must not import: linalg <- layers <- engine, invariance beside them on linalg."""

OLD_PATHS_PENDING = ("objectives", "methods", "tracking", "integrations")
"""Packages still importing a pre-split geometry path (headgeom.geometry.old_paths resolves them) until
their own branch switches; every other file of the package uses the new paths."""


def geometry_arrows(room: str, forbidden: tuple[str, ...]) -> list[str]:
    """``file:line imports module`` for an import of a forbidden part of headgeom.geometry from ``room``."""
    bad = []
    for path in sorted((SRC / "geometry" / room).rglob("*.py")):
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[:2] == ["headgeom", "geometry"] and len(parts) > 2 and parts[2] in forbidden:
                bad.append(f"{path.relative_to(SRC.parent)}:{line} imports {module}")
    return sorted(set(bad))


@pytest.mark.parametrize("room", list(GEOMETRY_ROOMS))
def test_geometry_rooms_import_one_way(room):
    assert (SRC / "geometry" / room / "__init__.py").is_file(), f"headgeom.geometry.{room} is gone: update this test"
    bad = geometry_arrows(room, GEOMETRY_ROOMS[room])
    assert not bad, f"headgeom.geometry.{room} imports a room built on it:\n" + "\n".join(bad)


def test_the_room_check_sees_relative_imports(tmp_path):
    # the check above can fail: a relative import from layers up into the engine is found
    layers = tmp_path / "headgeom" / "geometry" / "layers"
    layers.mkdir(parents=True)
    (layers / "m.py").write_text("from ..engine.chain import chain_pass\nfrom ..linalg import weighted_gram\n")
    globals()["SRC"], saved = tmp_path / "headgeom", SRC
    try:
        bad = geometry_arrows("layers", GEOMETRY_ROOMS["layers"])
    finally:
        globals()["SRC"] = saved
    assert bad == [
        "headgeom/geometry/layers/m.py:1 imports headgeom.geometry.engine.chain",
        "headgeom/geometry/layers/m.py:1 imports headgeom.geometry.engine.chain.chain_pass"]


def test_no_pre_split_geometry_path_is_imported():
    from headgeom.geometry import __all__ as public
    from headgeom.geometry.old_paths import OLD_PATHS

    bad = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] in OLD_PATHS_PENDING:
            continue
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[:2] == ["headgeom", "geometry"] and len(parts) > 2 and parts[2] in OLD_PATHS \
                    and parts[2] not in public:
                bad.append(f"{path.relative_to(SRC.parent)}:{line} imports {module}")
    assert not bad, ("imports of a module path geometry/ had before its rooms (see "
                     "headgeom.geometry.old_paths.OLD_PATHS for the new one):\n" + "\n".join(sorted(set(bad))))


def test_every_old_geometry_path_is_its_new_module():
    import importlib

    from headgeom.geometry.old_paths import OLD_PATHS

    for old, new in OLD_PATHS.items():
        assert importlib.import_module(f"headgeom.geometry.{old}") is importlib.import_module(f"headgeom.geometry.{new}")
