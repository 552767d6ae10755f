"""The parsers of the ``headgeom`` command line, one module per command, free of torch.

Building every parser imports only the standard library and these modules, so ``headgeom
--help`` and every ``headgeom COMMAND --help`` answer at once; a command's work is named as
``"package.module:function"`` (:class:`Command`) and imported when the command runs. Names the
parsers list (methods, readings, experiment ids, ...) are the constants of :mod:`.vocabulary`, a
file generated from the registries by ``tools/write_vocabulary.py`` (the tests fail while it is
stale).

One vocabulary across commands: ``--out DIR`` is always a folder, ``--json FILE`` always one JSON
file, ``--batch-size N`` a batch, ``--quiet`` turns off progress bars and messages; older names
still work for one release and print a one-line note (:func:`.options.deprecated_alias`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .outputs import Output

__all__ = ["Command", "Output"]


@dataclass(frozen=True)
class Command:
    """A command's work, ``target = "module:function"`` taking the parsed arguments, imported
    when called; ``outputs(args)`` lists where it will write, checked before any work."""

    target: str
    outputs: Callable[[Any], list[Output]] = lambda args: []

    @property
    def __name__(self) -> str:  # so the parsed ``func`` reads like the function it stands for
        return self.target.partition(":")[2]

    def __call__(self, args: Any) -> int:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)(args)
