"""The repository's scripts (tools/, benchmarks/: folders, not packages) imported as modules by the tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """``path`` imported as the module ``<folder>_<stem>`` (registered in sys.modules: a dataclass in it looks
    its module up by name)."""
    name = f"{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tool(name: str) -> ModuleType:
    """tools/<name>.py as a module."""
    return load_script(ROOT / "tools" / f"{name}.py")
