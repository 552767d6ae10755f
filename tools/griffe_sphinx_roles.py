"""A Griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the docstrings' Sphinx roles become
cross-references on the docs site.

headgeom's docstrings name code the Sphinx way, ``:func:`effective_hessian```, ``:mod:`.ddp```,
``:class:`~headgeom.geometry.head_cache.HeadCache```: one convention, kept in the code, that
reads well in ``help()`` and in an editor. mkdocstrings renders Markdown, where a role would show
as raw text, so this extension rewrites each role, once Griffe has loaded the package, into an
optional mkdocs-autorefs reference to the object it names:

- the target is resolved as Sphinx does: a full path as given; ``.name`` under the package of the
  docstring's module (then the module itself); a bare ``name`` or ``Class.attr`` in the docstring
  owner's scope (its members, its module's names and imports);
- the text shown is the target as written, without ``~`` (which shows its last part only) or a
  leading dot;
- the reference is *optional*: a target documented on the site becomes a link, any other plain
  code (autorefs' own rule for the references mkdocstrings writes), so a docstring naming a
  private helper never breaks ``mkdocs build --strict``.

tests/test_docs_site.py checks that the built site holds no raw role and that roles became links.
"""
from __future__ import annotations

import html
import re
from typing import Any

import griffe

__all__ = ["ROLE", "SphinxRoles", "resolve_target", "rewrite"]

ROLE = re.compile(r":(?:py:)?(?P<role>func|class|mod|data|meth|attr|exc|obj|const):`(?P<target>[^`]+)`")
"""A Sphinx Python role with its target (an explicit title, ``text <target>``, is allowed too)."""


def _exists(loader: griffe.GriffeLoader, path: str) -> bool:
    try:
        loader.modules_collection.get_member(path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return False
    return True


def resolve_target(target: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    """The full path of the object ``target`` names in ``obj``'s docstring (as written when nothing
    matches: the reference then shows as code)."""
    module = obj if obj.is_module else obj.module
    if target.startswith("."):
        package = module if module.is_package else (module.parent or module)
        for base in (package.path, module.path):
            if _exists(loader, f"{base}{target}"):
                return f"{base}{target}"
        return f"{package.path}{target}"
    if _exists(loader, target):
        return target
    head, _, rest = target.partition(".")
    try:
        path = obj.resolve(head)
    except griffe.NameResolutionError:
        return target
    return f"{path}.{rest}" if rest else path


def rewrite(text: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    """``text`` with every role turned into an optional autorefs reference (module docstring)."""

    def one(match: re.Match[str]) -> str:
        target = match["target"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", target)
        title, target = (explicit["title"], explicit["target"]) if explicit else (None, target)
        short = target.startswith("~")
        target = target.lstrip("~")
        shown = title or (target.rsplit(".", 1)[-1] if short else target.lstrip("."))
        if match["role"] in ("func", "meth") and not title:
            shown += "()" if not shown.endswith(")") else ""
        path = resolve_target(target, obj, loader)
        return (f'<autoref identifier="{html.escape(path)}" optional><code>{html.escape(shown)}</code>'
                f"</autoref>")

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring once the object tree is complete."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        self.on_object(obj=pkg, loader=loader)  # the top package gets no on_object of its own

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None or ":" not in obj.docstring.value:
            return
        obj.docstring.value = rewrite(obj.docstring.value, obj, loader)
