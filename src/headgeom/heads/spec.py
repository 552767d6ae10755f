"""HeadSpec: a projection head as a small frozen dataclass, and its compact string form.

A head maps z in R^{widths[0]} to u in R^{widths[-1]} through ``len(widths) - 1`` Linears::

    hidden layer l:  Linear(widths[l] -> widths[l+1], bias) -> [norm] -> activation
    last layer:      Linear(widths[-2] -> widths[-1], last_bias) -> [last_norm]

With ``bottleneck = b`` (DINO, facebookresearch/dino vision_transformer.py DINOHead) the last
Linear outputs b instead, then comes L2Normalize, then a weight-normalised
Linear(b -> widths[-1], bias=False) whose weight_g is filled with 1 and, with
``norm_last_layer``, frozen; ``last_norm`` follows that final Linear.

Compact string grammar (``parse_head`` / ``HeadSpec.to_string``)::

    HEAD    := WIDTHS ( ":" TOKEN )*                 tokens in any order, each kind once
    WIDTHS  := INT ( "-" INT )+                      512-2048-2048
    TOKEN   := ACT                                   relu gelu silu swish softplus tanh elu linear identity
             | ACT "=" VALUE                         softplus=5 (beta), elu=0.5 (alpha), gelu=tanh
             | ACT "(" KEY "=" VALUE ( "," KEY "=" VALUE )* ")"    softplus(beta=5,threshold=10)
             | "bn" | "ln"                           norm of every hidden layer (default none)
             | "last=" ( "bn" | "bn_noaffine" | "ln" )   norm after the last Linear
             | "nobias"                              bias=False (every Linear)
             | "lastbias" | "nolastbias"             last_bias=True / False (default: as bias)
             | "dino=" INT                           bottleneck dim (DINO head)
             | "nonormlast"                          DINO norm_last_layer=False

Examples: ``512-2048-2048:silu:bn:last=bn:nobias`` (the paper's projector with BN, docs/paper.md §3),
``384-2048-2048-65536:gelu:dino=256`` (DINO). The activation defaults to relu. ``to_string``
writes the canonical order (widths, activation, norm, last, nobias, lastbias, dino,
nonormlast) and ``parse_head(spec.to_string()) == spec`` for every valid spec.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from headgeom.heads.activations import canonical_act, check_act_kwargs, get_activation_def

NORMS = ("none", "bn", "ln")
LAST_NORMS = ("none", "bn", "bn_noaffine", "ln")
EXAMPLE = "512-2048-2048:silu:bn:last=bn:nobias"


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class HeadSpec:
    """A projection head: widths (input, hidden..., output) plus layer options.

    Lists and dicts given to the constructor are coerced to tuples (``activation_kwargs``
    to sorted (key, value) pairs) and activation aliases to canonical names, so specs that
    describe the same head compare equal and are hashable.
    """

    widths: tuple[int, ...]
    activation: str = "relu"
    activation_kwargs: tuple[tuple[str, Any], ...] = ()
    norm: str = "none"
    last_norm: str = "none"
    bias: bool = True
    last_bias: bool | None = None
    bottleneck: int | None = None
    norm_last_layer: bool = True

    def __post_init__(self) -> None:
        widths = self.widths
        if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
            raise TypeError(
                f"HeadSpec.widths must be a sequence of ints (input, hidden..., output), "
                f"got {widths!r}; e.g. widths=(512, 2048, 2048)"
            )
        widths = tuple(widths)
        if len(widths) < 2:
            raise ValueError(
                f"HeadSpec.widths needs at least 2 entries (input and output), got {widths!r}; "
                f"e.g. widths=(512, 2048, 2048)"
            )
        bad = [w for w in widths if not _is_int(w) or w < 1]
        if bad:
            raise ValueError(
                f"HeadSpec.widths must be positive ints, got {widths!r} (bad entries {bad!r})"
            )
        object.__setattr__(self, "widths", widths)

        act = canonical_act(self.activation)
        object.__setattr__(self, "activation", act)
        kw = self.activation_kwargs
        if isinstance(kw, dict):
            items = list(kw.items())
        else:
            try:
                items = [tuple(pair) for pair in kw]
            except TypeError:
                raise TypeError(
                    f"HeadSpec.activation_kwargs must be a dict or (key, value) pairs, got {kw!r}"
                ) from None
            if any(len(pair) != 2 for pair in items):
                raise TypeError(f"HeadSpec.activation_kwargs must hold (key, value) pairs, got {kw!r}")
            keys = [k for k, _ in items]
            if len(set(keys)) != len(keys):
                raise ValueError(f"HeadSpec.activation_kwargs repeats a key: {kw!r}")
        checked = check_act_kwargs(act, dict(items))
        object.__setattr__(self, "activation_kwargs", tuple(sorted(checked.items())))

        if self.norm not in NORMS:
            raise ValueError(f"HeadSpec.norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.last_norm not in LAST_NORMS:
            raise ValueError(
                f"HeadSpec.last_norm must be one of {', '.join(LAST_NORMS)}, got {self.last_norm!r}"
            )
        if not isinstance(self.bias, bool):
            raise TypeError(f"HeadSpec.bias must be a bool, got {self.bias!r}")
        if self.last_bias is not None and not isinstance(self.last_bias, bool):
            raise TypeError(f"HeadSpec.last_bias must be a bool or None, got {self.last_bias!r}")
        if not isinstance(self.norm_last_layer, bool):
            raise TypeError(f"HeadSpec.norm_last_layer must be a bool, got {self.norm_last_layer!r}")
        if self.bottleneck is not None:
            if not _is_int(self.bottleneck) or self.bottleneck < 1:
                raise ValueError(
                    f"HeadSpec.bottleneck must be a positive int or None, got {self.bottleneck!r}; "
                    f"e.g. bottleneck=256 for DINO"
                )
            if self.last_bias:
                raise ValueError(
                    "HeadSpec.last_bias=True is impossible with a DINO bottleneck: the "
                    "weight-normalised last Linear has no bias; leave last_bias=None"
                )
        elif not self.norm_last_layer:
            raise ValueError(
                "HeadSpec.norm_last_layer=False only applies to DINO heads; set bottleneck "
                "(e.g. bottleneck=256) or leave norm_last_layer=True"
            )

    # ---- derived quantities -------------------------------------------------------------
    @property
    def in_dim(self) -> int:
        return self.widths[0]

    @property
    def out_dim(self) -> int:
        return self.widths[-1]

    @property
    def act_kwargs(self) -> dict[str, Any]:
        """``activation_kwargs`` as a dict, ready for ``get_act(activation, **...)``."""
        return dict(self.activation_kwargs)

    @property
    def effective_last_bias(self) -> bool:
        """Whether the last Linear has a bias (False for the DINO weight-normed layer)."""
        if self.bottleneck is not None:
            return False
        return self.bias if self.last_bias is None else self.last_bias

    def num_parameters(self) -> int:
        """Parameter count of the built head (weight_g of a DINO layer included)."""
        n = 0
        hidden = self.widths[1:-1]
        for w_in, w_out in zip(self.widths[:-2], hidden):
            n += w_in * w_out + (w_out if self.bias else 0)
            n += 2 * w_out if self.norm in ("bn", "ln") else 0
        if self.bottleneck is None:
            w_in, w_out = self.widths[-2], self.widths[-1]
            n += w_in * w_out + (w_out if self.effective_last_bias else 0)
        else:
            b, w_in, w_out = self.bottleneck, self.widths[-2], self.widths[-1]
            n += w_in * b + (b if self.bias else 0)
            n += b * w_out + w_out  # weight_v and weight_g
        n += 2 * self.out_dim if self.last_norm in ("bn", "ln") else 0
        return n

    # ---- compact string -----------------------------------------------------------------
    def to_string(self) -> str:
        """Canonical compact form; ``parse_head(spec.to_string()) == spec``."""
        parts = ["-".join(str(w) for w in self.widths), _format_act(self.activation, self.act_kwargs)]
        if self.norm != "none":
            parts.append(self.norm)
        if self.last_norm != "none":
            parts.append(f"last={self.last_norm}")
        if not self.bias:
            parts.append("nobias")
        if self.last_bias is not None:
            parts.append("lastbias" if self.last_bias else "nolastbias")
        if self.bottleneck is not None:
            parts.append(f"dino={self.bottleneck}")
        if not self.norm_last_layer:
            parts.append("nonormlast")
        return ":".join(parts)

    def __str__(self) -> str:
        return self.to_string()


def _format_value(v: Any) -> str:
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    return str(v)


def _format_act(name: str, kwargs: dict[str, Any]) -> str:
    if not kwargs:
        return name
    primary = get_activation_def(name).primary
    if list(kwargs) == [primary]:
        return f"{name}={_format_value(kwargs[primary])}"
    inner = ",".join(f"{k}={_format_value(v)}" for k, v in sorted(kwargs.items()))
    return f"{name}({inner})"


def _fail(s: str, token: str, why: str) -> None:
    raise ValueError(
        f"cannot parse head string {s!r}: token {token!r} {why}. Example: {EXAMPLE!r}; "
        f"tokens after the widths: an activation (relu, silu, softplus=5, gelu=tanh, linear), "
        f"bn|ln, last=bn|bn_noaffine|ln, nobias, lastbias|nolastbias, dino=INT, nonormlast"
    )


def _parse_act_value(s: str, token: str, name: str, key: str, text: str) -> Any:
    p = get_activation_def(name).params.get(key)
    if p is None:
        allowed = ", ".join(sorted(get_activation_def(name).params)) or "none"
        _fail(s, token, f"sets {key!r}, which {name} does not take (its keywords: {allowed})")
    if p.kind is float:
        try:
            value = float(text)
        except ValueError:
            _fail(s, token, f"has {key}={text!r}, which is not a number")
        if not math.isfinite(value):
            _fail(s, token, f"has {key}={text!r}, which is not finite")
        return value
    return text


def _parse_act(s: str, token: str) -> tuple[str, dict[str, Any]] | None:
    """(canonical name, kwargs) if ``token`` is an activation token, else None."""
    if "(" in token:
        if not token.endswith(")"):
            _fail(s, token, "opens '(' without closing ')'")
        head, inner = token[:-1].split("(", 1)
        try:
            name = canonical_act(head)
        except ValueError:
            return None
        kwargs: dict[str, Any] = {}
        for item in inner.split(","):
            if item.count("=") != 1 or not item.split("=")[0] or not item.split("=")[1]:
                _fail(s, token, f"has {item!r} where KEY=VALUE was expected")
            key, text = (t.strip() for t in item.split("="))
            if key in kwargs:
                _fail(s, token, f"repeats {key!r}")
            kwargs[key] = _parse_act_value(s, token, name, key, text)
        return name, kwargs
    head, _, text = token.partition("=")
    try:
        name = canonical_act(head)
    except ValueError:
        return None
    if not text:
        if "=" in token:
            _fail(s, token, "has '=' but no value")
        return name, {}
    primary = get_activation_def(name).primary
    if primary is None:
        _fail(s, token, f"gives a value, but {name} has no parameter")
    return name, {primary: _parse_act_value(s, token, name, primary, text)}


def parse_head(s: str) -> HeadSpec:
    """Parse the compact form (grammar in the module docstring) into a HeadSpec.

    >>> parse_head("512-2048-2048:silu:bn").norm
    'bn'
    """
    if not isinstance(s, str):
        raise TypeError(f"parse_head expects a str such as {EXAMPLE!r}, got {type(s).__name__} {s!r}")
    tokens = [t.strip() for t in s.strip().split(":")]
    first, rest = tokens[0], tokens[1:]
    try:
        widths = tuple(int(w) for w in first.split("-"))
    except ValueError:
        _fail(s, first, "is not widths such as 512-2048-2048 (ints joined by '-')")
    if len(widths) < 2 or any(w < 1 for w in widths):
        _fail(s, first, "must give at least two positive widths (input and output)")

    fields: dict[str, Any] = {}
    seen: dict[str, str] = {}

    def put(kind: str, token: str, **values: Any) -> None:
        if kind in seen:
            _fail(s, token, f"sets the {kind} a second time (first set by {seen[kind]!r})")
        seen[kind] = token
        fields.update(values)

    for token in rest:
        low = token.lower()
        if not low:
            _fail(s, token, "is empty (two ':' in a row or a trailing ':')")
        if low in ("bn", "ln"):
            put("norm", token, norm=low)
        elif low.startswith("last="):
            value = low[len("last="):]
            if value not in LAST_NORMS or value == "none":
                _fail(s, token, "must be last=bn, last=bn_noaffine or last=ln")
            put("last norm", token, last_norm=value)
        elif low == "nobias":
            put("bias", token, bias=False)
        elif low in ("lastbias", "nolastbias"):
            put("last bias", token, last_bias=(low == "lastbias"))
        elif low.startswith("dino="):
            text = low[len("dino="):]
            if not text.isdigit() or int(text) < 1:
                _fail(s, token, "must be dino=INT with a positive bottleneck dim, e.g. dino=256")
            put("bottleneck", token, bottleneck=int(text))
        elif low == "nonormlast":
            put("norm_last_layer", token, norm_last_layer=False)
        else:
            act = _parse_act(s, low)
            if act is None:
                _fail(s, token, "is not a known option or activation")
            name, kwargs = act
            put("activation", token, activation=name, activation_kwargs=kwargs)
    try:
        return HeadSpec(widths=widths, **fields)
    except (ValueError, TypeError) as err:
        raise ValueError(f"head string {s!r} is well formed but not a valid head: {err}") from err
