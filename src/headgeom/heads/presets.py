"""Named head presets: each a function returning a HeadSpec, quoting the paper or code it follows.

Presets are thin: they only fill a HeadSpec, so every preset is also a compact string
(``get_head_spec("byol").to_string()``). Defaults are the source's defaults (usually a
ResNet-50 input of 2048); pass ``in_dim=512`` for a CIFAR ResNet-18.
"""
from __future__ import annotations

import inspect
from typing import Callable

from headgeom.heads.spec import HeadSpec


def _mlp_dims(text: str, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(w) for w in text.split("-"))
    except ValueError:
        raise ValueError(f"{what} must be ints joined by '-', e.g. '8192-8192-8192', got {text!r}") from None
    if not dims:
        raise ValueError(f"{what} must name at least one layer, got {text!r}")
    return dims


def paper_projector(in_dim: int = 512, activation: str = "silu", bn: bool = False) -> HeadSpec:
    """The paper's projector (docs/paper.md §3).

    "Linear(d→2048, no bias) → [BN] → act → Linear(2048→2048, no bias) → [BN];
    'linear' = the two linears with nothing between. Activations ReLU, GELU, SiLU."
    With ``bn`` both BN layers are present (affine BatchNorm1d).
    """
    norm = "bn" if bn else "none"
    return HeadSpec((in_dim, 2048, 2048), activation=activation, norm=norm, last_norm=norm, bias=False)


def paper_predictor(activation: str = "silu", bn: bool = False, in_dim: int = 2048) -> HeadSpec:
    """The paper's SimSiam predictor (docs/paper.md §3).

    "predictor 2048→512→2048 with the same activation/BN as the projector", i.e. the
    projector template Linear(no bias) → [BN] → act → Linear(no bias) → [BN]. Note that the
    template puts BN after the output Linear too, unlike the official SimSiam predictor
    (see ``simsiam_predictor``). The output dim equals ``in_dim``.
    """
    norm = "bn" if bn else "none"
    return HeadSpec((in_dim, 512, in_dim), activation=activation, norm=norm, last_norm=norm, bias=False)


def simclr(in_dim: int = 2048, hidden_dim: int = 2048, out_dim: int = 128, bn: bool = False) -> HeadSpec:
    """SimCLR v1 projection head (Chen et al. 2020, arXiv 2002.05709, §2.1 and B.9).

    Paper: "We use a MLP with one hidden layer to obtain z_i = g(h_i) = W(2)σ(W(1)h_i)
    where σ is a ReLU non-linearity", 2048 → 2048 → 128 on ResNet-50. ``bn=False`` is this
    text and lightly's original ``_get_simclr_projection_head`` (Linear → ReLU → Linear, both
    with bias; its BatchNorm line commented out, citing google-research/simclr
    model_util.py#L141).

    ``bn=True`` follows the later google-research/simclr model_util.py ``projection_head``
    and lightly's current SimCLRProjectionHead(batch_norm=True): every Linear is followed
    by BN and has no bias. (The official TF code's last BN has a scale but no centre; ours
    is an affine BatchNorm1d with both.)
    """
    if bn:
        return HeadSpec((in_dim, hidden_dim, out_dim), activation="relu", norm="bn", last_norm="bn", bias=False)
    return HeadSpec((in_dim, hidden_dim, out_dim), activation="relu", bias=True)


def simsiam_projector(in_dim: int = 2048, dim: int = 2048) -> HeadSpec:
    """SimSiam 3-layer projector, facebookresearch/simsiam simsiam/builder.py.

    "build a 3-layer projector": Linear(prev_dim, prev_dim, bias=False), BatchNorm1d,
    ReLU (first layer); Linear(prev_dim, prev_dim, bias=False), BatchNorm1d, ReLU (second
    layer); encoder.fc = Linear(prev_dim, dim), BatchNorm1d(dim, affine=False) (output
    layer). ``prev_dim`` is the backbone width, so hidden = ``in_dim``. The official fc keeps
    a bias frozen at its init ("not use bias as followed by BN"); a constant shift before
    BN cancels, so we build it without one.
    """
    return HeadSpec((in_dim, in_dim, in_dim, dim), activation="relu", norm="bn",
                    last_norm="bn_noaffine", bias=False)


def simsiam_predictor(in_dim: int = 2048, pred_dim: int = 512) -> HeadSpec:
    """SimSiam 2-layer predictor, facebookresearch/simsiam simsiam/builder.py.

    "build a 2-layer predictor": Linear(dim, pred_dim, bias=False), BatchNorm1d(pred_dim),
    ReLU (hidden layer); Linear(pred_dim, dim) (output layer, with bias). ``in_dim`` is the
    official ``dim``.
    """
    return HeadSpec((in_dim, pred_dim, in_dim), activation="relu", norm="bn", bias=False, last_bias=True)


def byol(in_dim: int = 2048, hidden_dim: int = 4096, out_dim: int = 256) -> HeadSpec:
    """BYOL projector (Grill et al. 2020, arXiv 2006.07733; deepmind-research byol/utils/networks.py MLP).

    Paper: "a linear layer with output size 4096 followed by batch normalization, rectified
    linear units (ReLU), and a final linear layer with output dimension 256". The official
    MLP uses hk.Linear(hidden_size, with_bias=True) → hk.BatchNorm → relu →
    hk.Linear(output_size, with_bias=False).
    """
    return HeadSpec((in_dim, hidden_dim, out_dim), activation="relu", norm="bn", bias=True, last_bias=False)


def byol_predictor(in_dim: int = 256, hidden_dim: int = 4096, out_dim: int = 256) -> HeadSpec:
    """BYOL predictor (arXiv 2006.07733 §3.3: "The predictor q_θ uses the same architecture as g_θ").

    deepmind-research byol/byol_experiment.py builds it from the same networks.py MLP class,
    on the 256-d projection: 256 → 4096 → 256.
    """
    return byol(in_dim=in_dim, hidden_dim=hidden_dim, out_dim=out_dim)


def vicreg(in_dim: int = 2048, mlp: str = "8192-8192-8192") -> HeadSpec:
    """VICReg expander, facebookresearch/vicreg main_vicreg.py ``Projector``.

    ``mlp_spec = f"{embedding}-{args.mlp}"``; for every hidden layer Linear(f[i], f[i+1])
    (with bias), BatchNorm1d, ReLU(True); then Linear(f[-2], f[-1], bias=False).
    Default ``--mlp 8192-8192-8192``.
    """
    dims = (in_dim,) + _mlp_dims(mlp, "vicreg mlp")
    return HeadSpec(dims, activation="relu", norm="bn", bias=True, last_bias=False)


def barlow_twins(in_dim: int = 2048, projector: str = "8192-8192-8192") -> HeadSpec:
    """Barlow Twins projector, facebookresearch/barlowtwins main.py ``BarlowTwins.__init__``.

    ``sizes = [2048] + projector``; for every hidden layer Linear(bias=False),
    BatchNorm1d, ReLU(inplace=True); then Linear(sizes[-2], sizes[-1], bias=False).
    Default ``--projector 8192-8192-8192``. The affine-free ``self.bn`` applied to z1, z2
    belongs to the loss (cross-correlation), not to the projector.
    """
    dims = (in_dim,) + _mlp_dims(projector, "barlow_twins projector")
    return HeadSpec(dims, activation="relu", norm="bn", bias=False)


def dino(in_dim: int = 384, out_dim: int = 65536, use_bn: bool = False, norm_last_layer: bool = True,
         nlayers: int = 3, hidden_dim: int = 2048, bottleneck_dim: int = 256) -> HeadSpec:
    """DINO head, facebookresearch/dino vision_transformer.py ``DINOHead``.

    Argument names and defaults are DINOHead's (in_dim 384 = ViT-S/16 embed_dim; out_dim
    65536 = main_dino.py's default). ``nlayers`` Linears (in → hidden ... → bottleneck,
    each hidden one with bias, optional BN and nn.GELU), then
    ``nn.functional.normalize(x, dim=-1, p=2)``, then
    ``nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))`` with
    ``weight_g`` filled with 1 and ``requires_grad = False`` if ``norm_last_layer``.
    Initialisation as DINOHead: the MLP's Linears trunc_normal(std=.02) with zero bias, the
    last layer nn.Linear's default (headgeom.heads.build.dino_init_).
    """
    if isinstance(nlayers, bool) or not isinstance(nlayers, int):
        raise TypeError(f"dino nlayers must be an int, got {nlayers!r}")
    nlayers = max(nlayers, 1)  # as DINOHead
    widths = (in_dim,) + (hidden_dim,) * (nlayers - 1) + (out_dim,)
    return HeadSpec(widths, activation="gelu", norm="bn" if use_bn else "none", bias=True,
                    bottleneck=bottleneck_dim, norm_last_layer=norm_last_layer)


HEAD_PRESETS: dict[str, Callable[..., HeadSpec]] = {
    "paper_projector": paper_projector,
    "paper_predictor": paper_predictor,
    "simclr": simclr,
    "simsiam_projector": simsiam_projector,
    "simsiam_predictor": simsiam_predictor,
    "byol": byol,
    "byol_predictor": byol_predictor,
    "vicreg": vicreg,
    "barlow_twins": barlow_twins,
    "dino": dino,
}


def get_head_spec(name: str, **kwargs) -> HeadSpec:
    """The HeadSpec of preset ``name`` with its arguments, e.g. ``get_head_spec("byol", in_dim=512)``."""
    if name not in HEAD_PRESETS:
        raise ValueError(
            f"unknown head preset {name!r}; presets are {', '.join(sorted(HEAD_PRESETS))} "
            f"(or give a compact string such as '512-2048-2048:silu:bn')"
        )
    fn = HEAD_PRESETS[name]
    sig = inspect.signature(fn)
    unknown = sorted(set(kwargs) - set(sig.parameters))
    if unknown:
        raise TypeError(f"head preset {name!r} takes no argument(s) {unknown}; its signature is {name}{sig}")
    return fn(**kwargs)
