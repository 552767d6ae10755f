"""Projection heads read off official ``nn.Sequential`` state dicts (docs/paper.md §4, pitfall 10).

Official heads are ``nn.Sequential``s whose parameters sit under integer indices
(``projector.0.weight``, ``projector.1.running_mean``, ...). :func:`sequential_modules` groups
those keys into modules and tells Linear, BatchNorm and LayerNorm apart by their tensors;
:func:`spec_from_modules` turns the module list into a :class:`~headgeom.heads.HeadSpec` given
the activation (activations hold no tensors, so the release says which); and
:func:`head_state` renames the tensors to the built ``ProjectionHead``'s ``layers.{j}.*`` keys by
walking both module lists in order. The DINO last layer (``weight_g``/``weight_v``, or a plain
``weight`` in the ResNet-50 release) maps to the weight-normalised Linear of a ``dino=`` head.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from headgeom.heads import HeadSpec, ProjectionHead

__all__ = ["CheckpointArchitectureError", "SeqModule", "sequential_modules", "spec_from_modules", "head_state"]


class CheckpointArchitectureError(ValueError):
    """The checkpoint's keys or shapes fit no architecture headgeom can build."""


@dataclass(frozen=True)
class SeqModule:
    """One module of an official Sequential: its index, kind and tensors (keys without prefix)."""

    index: int
    kind: str  # "linear", "bn", "ln" or "wn" (weight-normalised Linear)
    tensors: dict[str, Tensor]

    @property
    def affine(self) -> bool:
        return "weight" in self.tensors

    @property
    def has_bias(self) -> bool:
        return "bias" in self.tensors

    @property
    def shape(self) -> tuple[int, int]:
        """(out, in) of a Linear or weight-normalised Linear."""
        w = self.tensors["weight_v"] if self.kind == "wn" else self.tensors["weight"]
        return int(w.shape[0]), int(w.shape[1])


def module_of(name: str, tensors: dict[str, Tensor], index: int = -1) -> SeqModule:
    """Classify one module's tensors: Linear, weight-normed Linear, BatchNorm or LayerNorm."""
    keys = set(tensors)
    if {"weight_g", "weight_v"} <= keys:
        return SeqModule(index, "wn", tensors)
    if "running_mean" in keys:
        return SeqModule(index, "bn", tensors)
    w = tensors.get("weight")
    if w is not None and w.ndim == 2:
        return SeqModule(index, "linear", tensors)
    if w is not None and w.ndim == 1 and keys <= {"weight", "bias"}:
        return SeqModule(index, "ln", tensors)
    raise CheckpointArchitectureError(
        f"cannot tell what module {name} is from its tensors "
        f"{ {k: tuple(v.shape) for k, v in tensors.items()} }; expected a Linear (2-D weight), a "
        f"BatchNorm (running_mean) or a LayerNorm (1-D weight and bias)."
    )


def sequential_modules(state: dict[str, Tensor], where: str) -> list[SeqModule]:
    """Group ``{"3.weight": t, ...}`` into modules in index order; raises on a non-index key."""
    groups: dict[int, dict[str, Tensor]] = {}
    for key, value in state.items():
        idx, _, param = key.partition(".")
        if not idx.isdigit() or not param:
            raise CheckpointArchitectureError(
                f"{where}.{key} is not an nn.Sequential key '<index>.<tensor>'; this head layout is not known."
            )
        groups.setdefault(int(idx), {})[param] = value
    return [module_of(f"{where}.{i}", groups[i], i) for i in sorted(groups)]


def spec_from_modules(mods: list[SeqModule], activation: str, where: str,
                      last: SeqModule | None = None, norm_last_layer: bool = True) -> HeadSpec:
    """HeadSpec of Linear [norm] activation ... Linear [norm]; with ``last`` a DINO head.

    ``last`` is the DINO ``last_layer`` (weight-normed or plain Linear without bias); the last
    Linear of ``mods`` is then the bottleneck and the spec gets ``bottleneck`` set.
    """
    groups: list[tuple[SeqModule, SeqModule | None]] = []
    for m in mods:
        if m.kind == "linear":
            groups.append((m, None))
        elif m.kind in ("bn", "ln") and groups and groups[-1][1] is None:
            groups[-1] = (groups[-1][0], m)
        else:
            raise CheckpointArchitectureError(
                f"{where}.{m.index} is a {m.kind} where a Linear or a norm after a Linear was expected; "
                f"headgeom builds heads of the form Linear [norm] act ... Linear [norm]."
            )
    if not groups:
        raise CheckpointArchitectureError(f"{where} holds no Linear layer.")
    widths = [groups[0][0].shape[1]]
    for lin, _ in groups:
        out, inp = lin.shape
        if inp != widths[-1]:
            raise CheckpointArchitectureError(
                f"{where}.{lin.index}.weight takes {inp} inputs but the layer before gives {widths[-1]}: "
                f"the head's shapes are inconsistent (wrong or damaged file)."
            )
        widths.append(out)
    hidden = groups[:-1] if last is None else groups
    tail = groups[-1]
    norms = {(n.kind if n is not None else "none") for _, n in groups[:-1]}
    if any(n is not None and n.kind == "bn" and not n.affine for _, n in groups[:-1]):
        raise CheckpointArchitectureError(f"{where}: an affine-free BatchNorm inside the head is not supported.")
    if len(norms) > 1:
        raise CheckpointArchitectureError(f"{where}: hidden layers mix norms {sorted(norms)}; not supported.")
    biases = {lin.has_bias for lin, _ in hidden} or {tail[0].has_bias}
    if len(biases) > 1:
        raise CheckpointArchitectureError(f"{where}: hidden Linears differ in having a bias; not supported.")
    bias = biases.pop()
    norm = norms.pop() if norms else "none"
    if last is None:
        tail_norm = tail[1]
        last_norm = "none" if tail_norm is None else (
            "bn" if tail_norm.kind == "bn" and tail_norm.affine else
            "bn_noaffine" if tail_norm.kind == "bn" else "ln")
        last_bias = None if tail[0].has_bias == bias else tail[0].has_bias
        return HeadSpec(tuple(widths), activation=activation, norm=norm, last_norm=last_norm,
                        bias=bias, last_bias=last_bias)
    if tail[1] is not None:
        raise CheckpointArchitectureError(f"{where}: a norm after the DINO bottleneck Linear is not supported.")
    out_dim, b = last.shape
    if b != widths[-1]:
        raise CheckpointArchitectureError(
            f"{where} last_layer takes {b} inputs but the bottleneck gives {widths[-1]}: inconsistent shapes."
        )
    return HeadSpec(tuple(widths[:-1]) + (out_dim,), activation=activation, norm=norm, bias=bias,
                    bottleneck=widths[-1], norm_last_layer=norm_last_layer)


def _target_modules(head: ProjectionHead) -> list[tuple[int, str]]:
    out = []
    for j, layer in enumerate(head.layers):
        if isinstance(layer, nn.Linear):
            out.append((j, "wn" if hasattr(layer, "parametrizations") else "linear"))
        elif isinstance(layer, nn.BatchNorm1d):
            out.append((j, "bn"))
        elif isinstance(layer, nn.LayerNorm):
            out.append((j, "ln"))
    return out


def _weight_norm_from_plain(w: Tensor) -> tuple[Tensor, Tensor]:
    """(g, v) with g · v/‖v‖ = w row-wise exactly; zero rows get v = e_0, g = 0."""
    g = w.norm(dim=1, keepdim=True)
    v = w.clone()
    zero = g.squeeze(1) == 0
    if zero.any():
        v[zero] = 0
        v[zero, 0] = 1
    return g, v


def head_state(head: ProjectionHead, mods: list[SeqModule], last: SeqModule | None = None) -> dict[str, Tensor]:
    """The tensors of ``mods`` (+ DINO ``last``) renamed to the keys of the built ``head``."""
    spec = head.spec
    targets = _target_modules(head)
    sources = list(mods) + ([last] if last is not None else [])
    if len(targets) != len(sources):
        raise CheckpointArchitectureError(
            f"head {spec.to_string()!r} has {len(targets)} modules with tensors, the checkpoint {len(sources)}."
        )
    state: dict[str, Tensor] = {}
    for (j, kind), src in zip(targets, sources):
        if kind == "wn":
            if src.kind == "wn":
                g, v = src.tensors["weight_g"], src.tensors["weight_v"]
            elif src.kind == "linear" and not src.has_bias:
                g, v = _weight_norm_from_plain(src.tensors["weight"])
            else:
                raise CheckpointArchitectureError(
                    f"the DINO last layer must be a Linear without bias, got a {src.kind} with "
                    f"tensors {sorted(src.tensors)}."
                )
            state[f"layers.{j}.parametrizations.weight.original0"] = g
            state[f"layers.{j}.parametrizations.weight.original1"] = v
            continue
        if kind != src.kind:
            raise CheckpointArchitectureError(
                f"module {src.index} of the checkpoint's head is a {src.kind}, but layer {j} of "
                f"{spec.to_string()!r} is a {kind}."
            )
        for name, t in src.tensors.items():
            state[f"layers.{j}.{name}"] = t
    return state

