"""What the engine derives from an analysis copy's weights alone, kept as long as the copy.

A :class:`~headgeom.geometry.engine.head_function.PreparedHead` carries one :class:`HeadFacts`: its
discovered, affine-folded chain (:mod:`headgeom.geometry.engine.discovery`; a traced chain per input
shape, since a forward may read the shape) and the chain's shared weight products
(:class:`~headgeom.geometry.engine.sandwich.ChainProducts`), and the passes' work buffers
(:class:`~headgeom.geometry.linalg.workspace.Workspace`). They are derived on first use and live
with the copy, which a :class:`~headgeom.geometry.engine.head_cache.HeadCache` hands out again only
while the head's weights are unchanged; a call without a cache gets a fresh copy and fresh facts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from ..linalg.workspace import Workspace
from .chain import fuse_affine_runs
from .discovery import Discovery, discover
from .sandwich import ChainProducts, chain_products


@dataclass(eq=False)
class HeadFacts:
    """The folded chains of one analysis copy (by input shape; a walked nn.Sequential's for every
    shape), its chain products, each derived once, and the work buffers its calls reuse."""

    chains: dict[tuple[int, ...] | None, Discovery] = field(default_factory=dict)
    products: ChainProducts | None = None
    workspace: Workspace = field(default_factory=Workspace)  # the passes' work buffers, reused across calls

    def chain(self, module: nn.Module, input_shape: tuple[int, ...]) -> Discovery:
        """The discovered chain of ``module`` for inputs of ``input_shape``, affine runs folded."""
        found = self.chains.get(None) or self.chains.get(input_shape)
        if found is None:
            raw = discover(module, input_shape)
            found = raw if raw.layers is None else Discovery(fuse_affine_runs(raw.layers), raw.how)
            self.chains[None if found.how == "sequential" else input_shape] = found
        return found

    def chain_products(self, layers: list[nn.Module], d: int, like: Tensor) -> ChainProducts:
        """The chain's shared products (:func:`~headgeom.geometry.engine.sandwich.chain_products`)."""
        if self.products is None:
            self.products = chain_products(layers, d, like)
        return self.products
