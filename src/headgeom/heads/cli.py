"""``headgeom heads [SPEC...]``: the head-spec grammar, or the canonical form and layers of heads.

The parser is :func:`headgeom.commands.heads.add_parser` (torch-free); it names :func:`run`.
"""
from __future__ import annotations

import argparse

from headgeom.commands.heads import grammar_text
from headgeom.heads.build import head_from
from headgeom.heads.presets import HEAD_PRESETS, get_head_spec
from headgeom.heads.resolution import resolve_head
from headgeom.heads.spec import HeadSpec, parse_head

__all__ = ["resolve_spec", "run"]


def resolve_spec(text: str, in_dim: int | None = None) -> HeadSpec:
    """The HeadSpec of a spec string or preset name; ``in_dim`` fills in ``d-`` and a preset's input."""
    if in_dim is not None:
        return resolve_head(text, in_dim, role="head", source=f"--in-dim {in_dim}", default=None)
    if text in HEAD_PRESETS:
        return get_head_spec(text)
    if text.strip().lower().startswith("d-") or text.strip().startswith("-"):
        raise ValueError(f"{text!r} leaves its input width to the backbone (d-); give the width with "
                         f"--in-dim D, e.g. headgeom heads {text} --in-dim 512")
    if not text[:1].isdigit():
        raise ValueError(f"{text!r} is neither a head preset ({', '.join(HEAD_PRESETS)}) nor a head spec such "
                         f"as '512-2048-2048:silu'; `headgeom heads` prints the grammar")
    return parse_head(text)


def run(args: argparse.Namespace) -> int:
    """Print the grammar (no SPEC), or each head's canonical spec, layers and parameter count."""
    if not args.specs:
        print(grammar_text())
        return 0
    for i, text in enumerate(args.specs):
        spec = resolve_spec(text, args.in_dim)
        head = head_from(spec)
        print(("\n" if i else "") + f"{text}  ->  {spec.to_string()}  ({spec.num_parameters():,} parameters)")
        print(head)
    return 0
