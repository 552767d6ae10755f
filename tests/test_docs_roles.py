"""The docstrings' Sphinx roles as the docs site renders them (tools/griffe_sphinx_roles.py): each
target resolved as Sphinx resolves it, shown as written, as an optional autorefs reference (a link
when the target is documented on the site, code otherwise; tests/test_docs_site.py checks the site)."""
from __future__ import annotations

from pathlib import Path

import pytest
from script_modules import tool

griffe = pytest.importorskip("griffe", reason='the docs site needs the "docs" extra: pip install -e ".[docs]"')

ROOT = Path(__file__).resolve().parents[1]
roles = tool("griffe_sphinx_roles")


@pytest.fixture(scope="module")
def loaded():
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / "src")])
    package = loader.load("headgeom")
    loader.resolve_aliases(implicit=False, external=False)
    return loader, package


@pytest.mark.parametrize("owner,target,path", [
    ("headgeom.train.loop", ".ddp", "headgeom.train.ddp"),  # a sibling module of the docstring's module
    ("headgeom.train.loop", ".interrupt.StopRequest", "headgeom.train.interrupt.StopRequest"),
    ("headgeom.commands", ".vocabulary", "headgeom.commands.vocabulary"),  # in a package: under the package
    ("headgeom.train.loop.train", "build_method_from_config", "headgeom.train.loop.build_method_from_config"),
    ("headgeom.train.loop", "TrainingInterrupted", "headgeom.train.interrupt.TrainingInterrupted"),  # an import
    ("headgeom.train.config.TrainConfig.from_dict", "to_dict", "headgeom.train.config.TrainConfig.to_dict"),
    ("headgeom.train.loop", "headgeom.runs.folder", "headgeom.runs.folder"),  # a full path as given
    ("headgeom.train.loop", "no_such_name", "no_such_name"),  # nothing matches: kept, shown as code
])
def test_targets_resolve_as_sphinx_resolves_them(loaded, owner, target, path):
    loader, _ = loaded
    assert roles.resolve_target(target, loader.modules_collection.get_member(owner), loader) == path


def test_a_role_becomes_an_optional_reference_showing_the_target_as_written(loaded):
    loader, _ = loaded
    owner = loader.modules_collection.get_member("headgeom.train.loop")
    text = ("see :func:`train`, :class:`~headgeom.train.interrupt.StopSignals`, :mod:`.ddp`, "
            ":meth:`the loader <headgeom.train.config.TrainConfig.from_dict>` and ``:literal`` text")
    assert roles.rewrite(text, owner, loader) == (
        'see <autoref identifier="headgeom.train.loop.train" optional><code>train()</code></autoref>, '
        '<autoref identifier="headgeom.train.interrupt.StopSignals" optional><code>StopSignals</code></autoref>, '
        '<autoref identifier="headgeom.train.ddp" optional><code>ddp</code></autoref>, '
        '<autoref identifier="headgeom.train.config.TrainConfig.from_dict" optional><code>the loader</code></autoref>'
        " and ``:literal`` text")
