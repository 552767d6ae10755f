"""The layers of a chain the engine's structured passes run on, and the rules that find them in a
head's forward.

One file per primitive kind, each its :class:`~headgeom.geometry.layers.base.ChainLayer` (the
protocol the passes run) and its rules (:mod:`headgeom.geometry.layers.registry`): ``linear``
(nn.Linear, F.linear), ``affine`` (eval BatchNorm1d, a norm's γ and β, the identities),
``elementwise`` (the activations of headgeom.heads' registry), ``row_norm`` (LayerNorm,
L2-normalisation), ``group_norm``, ``glu``, ``rms_norm``. Importing this package registers them all.

Built on :mod:`headgeom.geometry.linalg` only; the engine is built on it.
"""
from .affine import ChannelAffine, bn_affine
from .base import AffineLayer, AffinePass, ChainLayer, LayerPass, TailBlocks
from .elementwise import ELEMENTWISE_TYPES, Elementwise, activation_derivatives, is_elementwise
from .glu import GLUPass
from .group_norm import GroupNormalize, GroupNormPass
from .linear import effective_weight, fixed_linear
from .registry import (CHAIN_LAYERS, FUNCTION_RULES, MODULE_RULES, NotAChain, call_arguments, chain_layer,
                       function_rule, layer_of, module_rule, rule_for_module)
from .rms_norm import RMSNormalize
from .row_norm import RowNorm, RowNormPass, row_norm_pass

__all__ = ["AffineLayer", "AffinePass", "CHAIN_LAYERS", "ChainLayer", "ChannelAffine", "ELEMENTWISE_TYPES",
           "Elementwise", "FUNCTION_RULES", "GLUPass", "GroupNormPass", "GroupNormalize", "LayerPass", "MODULE_RULES",
           "NotAChain", "RMSNormalize", "RowNorm", "RowNormPass", "TailBlocks", "activation_derivatives", "bn_affine",
           "call_arguments", "chain_layer", "effective_weight", "fixed_linear", "function_rule", "is_elementwise",
           "layer_of", "module_rule", "row_norm_pass", "rule_for_module"]
