"""``headgeom heads``: the head-spec grammar (and its parser); ``headgeom heads SPEC`` shows a head.

The grammar is the one :func:`headgeom.heads.spec.parse_head` reads (its module docstring is the
reference); every example below is parsed and built by the tests.
"""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command, positive
from .vocabulary import ACTIVATION_ALIASES, ACTIVATIONS, HEAD_PRESETS

__all__ = ["EXAMPLES", "GRAMMAR", "add_parser", "grammar_text"]

GRAMMAR = f"""\
A head (--head, --predictor) is a preset name or a compact spec:

  WIDTHS[:ACTIVATION][:bn|ln][:OPTION...]      tokens after the widths in any order, each kind once

  WIDTHS       input, hidden..., output widths joined by '-', e.g. 512-2048-2048
               (train: start with d- to take the backbone's width, e.g. d-2048-2048)
  ACTIVATION   {', '.join(ACTIVATIONS)} (default relu)
               aliases: {', '.join(f'{a} = {c}' for a, c in ACTIVATION_ALIASES.items())}
               with a parameter: softplus=5 (beta), elu=0.5 (alpha), gelu=tanh (approximation),
               or several: softplus(beta=5,threshold=10)
  bn | ln      BatchNorm1d or LayerNorm after every hidden Linear (default: none)
  OPTION       last=bn | last=bn_noaffine | last=ln   a norm after the last Linear
               nobias                                 no bias in any Linear
               lastbias | nolastbias                  bias of the last Linear only
               dino=B                                 DINO head: bottleneck B, L2-normalise, then a
                                                      weight-normalised Linear to the output width
               nonormlast                             DINO: train that Linear's weight norm too

A hidden layer is Linear -> [norm] -> activation; the last is Linear -> [last norm].

presets: {', '.join(HEAD_PRESETS)}"""

# (spec, what it is); every one parses and builds (tests/commands/test_cli_parsers.py)
EXAMPLES = (
    ("512-2048-2048:silu", "two Linears with SiLU between"),
    ("512-2048-2048:silu:bn:last=bn:nobias", "the paper's projector with BatchNorm (preset paper_projector, bn)"),
    ("d-2048-2048:gelu", "the backbone's width d as input (train; headgeom heads needs --in-dim)"),
    ("2048-512-2048:relu:bn", "a SimSiam-style predictor"),
    ("64-256-256:softplus=5:ln", "softplus with beta 5, LayerNorm"),
    ("64-256-256:softplus(beta=5,threshold=10)", "softplus with two parameters"),
    ("384-2048-2048-65536:gelu:dino=256", "the DINO head of ViT-S/16"),
    ("128-128:linear", "a single Linear"),
)


def grammar_text() -> str:
    """The grammar, the examples and the presets, as ``headgeom heads`` prints them."""
    width = max(len(s) for s, _ in EXAMPLES)
    examples = "\n".join(f"  {s:<{width}}  {what}" for s, what in EXAMPLES)
    return f"{GRAMMAR}\n\nexamples:\n{examples}"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers, "heads", help="the head-spec grammar; show the layers of a head spec or preset",
        description=GRAMMAR + "\n\nWith SPEC: its canonical form, layers and parameter count.",
        examples=["headgeom heads                                  # the grammar, examples and presets",
                  "headgeom heads 512-2048-2048:silu:bn:last=bn:nobias paper_projector",
                  "headgeom heads d-2048-2048:gelu --in-dim 512"])
    p.add_argument("specs", nargs="*", metavar="SPEC", help="head spec or preset name")
    p.add_argument("--in-dim", type=positive(1), default=None, metavar="D",
                   help="input width: fills in a spec's d- and a preset's in_dim")
    p.set_defaults(func=Command("headgeom.heads.cli:run"))
    return p
