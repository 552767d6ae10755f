"""Resolve a projector / predictor given as a preset name, compact string or HeadSpec.

The input width is the backbone's feature dim d (projector) or the projector's output width
(predictor). A compact string may leave it to be filled in by starting with ``d-``
(``"d-2048-2048:silu"``) or ``-`` (``"-2048-2048:silu"``); otherwise the given first width is
checked, and a preset gets ``in_dim`` filled in.
"""
from __future__ import annotations

from typing import Callable

from headgeom.heads.presets import HEAD_PRESETS, get_head_spec
from headgeom.heads.spec import HeadSpec, parse_head


def _fill_input_width(text: str, in_dim: int) -> str:
    s = text.strip()
    if s.lower().startswith("d-"):
        return f"{in_dim}-{s[2:]}"
    if s.startswith("-"):
        return f"{in_dim}{s}"
    return s


def resolve_head(head: HeadSpec | str | None, in_dim: int, *, role: str, source: str,
                 default: Callable[[int], HeadSpec]) -> HeadSpec:
    """The HeadSpec of ``head`` with input width ``in_dim``; ``default(in_dim)`` when None.

    role: "projector" or "predictor" (for messages); source: what feeds it, e.g.
    "backbone 'resnet18'" (for messages).
    """
    if head is None:
        spec = default(in_dim)
    elif isinstance(head, HeadSpec):
        spec = head
    elif isinstance(head, str):
        if head in HEAD_PRESETS:
            spec = get_head_spec(head, in_dim=in_dim)
        else:
            text = _fill_input_width(head, in_dim)
            if not text[:1].isdigit():
                raise ValueError(
                    f"{role} {head!r} is neither a head preset ({', '.join(sorted(HEAD_PRESETS))}) "
                    f"nor a compact head string such as 'd-2048-2048:silu' or '{in_dim}-2048-2048:silu'"
                )
            spec = parse_head(text)
    else:
        raise TypeError(
            f"{role} must be None, a preset name, a compact head string or a HeadSpec; got "
            f"{type(head).__name__} {head!r}"
        )
    if spec.in_dim != in_dim:
        raise ValueError(
            f"{role} {spec.to_string()!r} takes inputs of width {spec.in_dim}, but the {source} "
            f"outputs width {in_dim}. Start the spec with {in_dim} (e.g. "
            f"'{in_dim}-{'-'.join(str(w) for w in spec.widths[1:])}') or with 'd-' to fill it in."
        )
    return spec
