"""build_method: head resolution, defaults, pseudo-collapse, weight-decay groups, recipes
and the error messages (unknown names, a predictor where there is none, width mismatches)."""
import json

import pytest
import torch
from torch import nn

from headgeom.heads import get_head_spec, parse_head
from headgeom.methods import METHODS, SSLMethod, build_method
from headgeom.objectives import barlow_twins, nt_xent, vicreg

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

BB = {"backbone_options": {"width": 1 / 32}}  # resnet18 with feature_dim 16


# ---- interface ----------------------------------------------------------------------------
def test_interface_and_json_spec():
    m = build_method("byol", "resnet18", head="d-16-8:silu", predictor="-4-8", **BB)
    assert isinstance(m, nn.Module) and isinstance(m, SSLMethod)
    assert m.name == "byol" and m.predictor is not None
    assert m.spec.head == "16-16-8:silu" and m.spec.predictor == "8-4-8:relu"
    json.dumps(m.spec.to_dict())
    out = m([torch.rand(4, 3, 16, 16), torch.rand(4, 3, 16, 16)])
    assert out["loss"].ndim == 0 and out["loss"].requires_grad
    assert [tuple(z.shape) for z in out["z"]] == [(4, 16), (4, 16)]
    assert isinstance(out["logs"], dict)


def test_head_strings_presets_and_specs_resolve_to_the_feature_dim():
    for head in ("d-32-8:gelu", "-32-8:gelu", "16-32-8:gelu", parse_head("16-32-8:gelu")):
        assert build_method("vicreg", "resnet18", head=head, **BB).spec.head == "16-32-8:gelu"
    m = build_method("simclr_oneway", "resnet18", head="simclr", **BB)
    assert m.spec.head == get_head_spec("simclr", in_dim=16).to_string()


def test_default_heads_are_the_methods_presets():
    expected = {
        "simclr": get_head_spec("simclr", in_dim=512, hidden_dim=512, out_dim=128),
        "simclr_oneway": get_head_spec("paper_projector", in_dim=512, activation="relu", bn=True),
        "simsiam": get_head_spec("simsiam_projector", in_dim=512),
        "byol": get_head_spec("byol", in_dim=512),
        "vicreg": get_head_spec("vicreg", in_dim=512),
        "barlow_twins": get_head_spec("barlow_twins", in_dim=512),
        "dino": get_head_spec("dino", in_dim=512),
    }
    for name, spec in expected.items():
        assert METHODS[name].default_head(512) == spec, name
    assert METHODS["simsiam"].default_predictor(2048) == get_head_spec("simsiam_predictor", in_dim=2048)
    assert METHODS["byol"].default_predictor(256) == get_head_spec("byol_predictor", in_dim=256)
    # MoCo v3 (moco-v3 builder.py MoCo_ResNet): _build_mlp(2, d, 4096, 256) with its last BN affine-free,
    # and the predictor _build_mlp(2, 256, 4096, 256, last_bn=False); every Linear without bias
    assert METHODS["mocov3"].default_head(512) == parse_head("512-4096-256:relu:bn:last=bn_noaffine:nobias")
    assert METHODS["mocov3"].default_predictor(256) == parse_head("256-4096-256:relu:bn:nobias")
    m = build_method("simclr", "resnet18", **BB)  # small enough to build
    assert m.spec.head == "16-16-128:relu"


def test_pseudo_collapse_scales_projector_linears_only():
    torch.manual_seed(0)
    a = build_method("byol", "resnet18", head="d-16-8:silu:bn", predictor="d-4-8", **BB)
    torch.manual_seed(0)
    b = build_method("byol", "resnet18", head="d-16-8:silu:bn", predictor="d-4-8", pseudo_collapse=0.1, **BB)
    assert b.spec.pseudo_collapse == 0.1
    for (name, pa), pb in zip(a.projector.named_parameters(), b.projector.parameters()):
        is_linear_weight = pa.ndim == 2
        torch.testing.assert_close(pb, 0.1 * pa if is_linear_weight else pa, rtol=0, atol=0)
    for pa, pb in zip(a.predictor.parameters(), b.predictor.parameters()):
        assert torch.equal(pa, pb)
    for po, pt in zip(b.projector.parameters(), b.target.module[1].parameters()):
        assert torch.equal(po, pt)  # the EMA target starts from the collapsed projector


# ---- optimisation groups --------------------------------------------------------------------
@pytest.mark.parametrize("name,head", [("byol", "d-16-8:silu:bn:last=bn"), ("dino", "d-16-8:gelu:ln:dino=4")])
def test_param_groups_exclude_biases_and_norm_parameters(name, head):
    m = build_method(name, "resnet18", head=head, **BB)
    groups = m.param_groups(0.05)
    assert [g["name"] for g in groups] == ["decay", "no_decay"]
    assert groups[0]["weight_decay"] == 0.05 and groups[1]["weight_decay"] == 0.0
    decay = {id(p) for p in groups[0]["params"]}
    keep = {id(p) for p in groups[1]["params"]}
    assert not decay & keep
    online = {}
    for prefix, module in (("backbone", m.backbone), ("projector", m.projector), ("predictor", m.predictor)):
        if module is not None:
            online.update({f"{prefix}.{n}": p for n, p in module.named_parameters() if p.requires_grad})
    assert decay | keep == {id(p) for p in online.values()}  # EMA copies and frozen tensors excluded
    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)
    for module in m.modules():
        if isinstance(module, norms) and module.weight is not None and module.weight.requires_grad:
            if id(module.weight) in decay | keep:
                assert id(module.weight) in keep and id(module.bias) in keep
        if isinstance(module, (nn.Linear, nn.Conv2d)) and id(module.weight) in decay | keep:
            assert id(module.weight) in decay
            if module.bias is not None:
                assert id(module.bias) in keep
    for n, p in online.items():
        assert (id(p) in keep) == (n.endswith(".bias") or p.ndim == 1), n
    head_ids = {id(p) for p in m.head_parameters()}
    bb_ids = {id(p) for p in m.backbone_parameters()}
    assert head_ids | bb_ids == decay | keep and not head_ids & bb_ids
    if name == "dino":  # DINO's frozen weight_g (norm_last_layer) is in no group
        g = m.projector.layers[-1].parametrizations.weight.original0
        assert not g.requires_grad and id(g) not in decay | keep


# ---- recipes --------------------------------------------------------------------------------
def test_recipes():
    m = build_method("simclr_oneway", "resnet18", head="d-8-8", **BB)
    assert m.recipe(16).name == "paper_simclr"
    assert build_method("simclr", "resnet18", head="d-8-8", recipe="simsiam", **BB).recipe(16).name == "simsiam"
    d = build_method("dino", "resnet18", head="d-8-8:gelu:dino=4", **BB)
    views = d.recipe(16, local_size=8, n_local=3)(torch.rand(2, 3, 16, 16), torch.Generator().manual_seed(0))
    assert [v.shape[-1] for v in views] == [16, 16, 8, 8, 8]
    out = d(list(views))
    assert len(out["z"]) == 5
    # defaults: main_dino.py's 8 local crops at 96/224 of the global size, a multiple of a ViT's patch
    crop = d.recipe(32).views[0]
    assert (crop.n_local, crop.local_size) == (8, 14)
    vit = build_method("dino", "vit_tiny", head="d-8-8:gelu:dino=4", backbone_options={"depth": 1},
                       n_local_crops=2)
    recipe = vit.recipe(32)
    assert (recipe.views[0].n_local, recipe.views[0].local_size) == (2, 12)  # patch 4
    views = recipe(torch.rand(2, 3, 32, 32), torch.Generator().manual_seed(0))
    assert len(vit(list(views))["z"]) == 4  # globals and locals through the ViT
    assert build_method("dino", "vit_small", head="d-8-8:gelu:dino=4", backbone_options={"depth": 1}
                        ).recipe(224).views[0].local_size == 96


# ---- errors ---------------------------------------------------------------------------------
def test_unknown_names():
    with pytest.raises(ValueError, match=r"unknown method 'simclrr'.*barlow_twins"):
        build_method("simclrr")
    with pytest.raises(ValueError, match=r"unknown backbone 'resnet19'"):
        build_method("simclr", "resnet19")
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['temprature'\]"):
        build_method("simclr", "resnet18", head="d-8-8", temprature=0.2, **BB)
    with pytest.raises(TypeError, match="must be a number"):
        build_method("simclr", "resnet18", head="d-8-8", temperature="hot", **BB)
    with pytest.raises(ValueError, match="neither a head preset"):
        build_method("simclr", "resnet18", head="big", **BB)


def test_predictor_for_a_method_without_one():
    with pytest.raises(ValueError, match=r"'vicreg' has no predictor.*\['byol', 'mocov3', 'simsiam'\]"):
        build_method("vicreg", "resnet18", head="d-8-8", predictor="d-4-8", **BB)


def test_width_mismatches():
    with pytest.raises(ValueError, match=r"takes inputs of width 32, but the backbone 'resnet18' outputs width 16"):
        build_method("simclr", "resnet18", head="32-8", **BB)
    with pytest.raises(ValueError, match=r"predictor '6-4-8:relu' takes inputs of width 6.*outputs width 8"):
        build_method("simsiam", "resnet18", head="d-8-8", predictor="6-4-8", **BB)
    with pytest.raises(ValueError, match=r"outputs width 5.*end the predictor with 8"):
        build_method("byol", "resnet18", head="d-8-8", predictor="d-4-5", **BB)


def test_bad_backbones_and_views():
    class NoDim(nn.Module):
        def forward(self, x):
            return x.mean((2, 3))

    with pytest.raises(TypeError, match="feature_dim"):
        build_method("simclr", NoDim(), head="3-8")
    with pytest.raises(TypeError, match="registered name or an nn.Module"):
        build_method("simclr", 42)
    m = build_method("simclr", "resnet18", head="d-8-8", **BB)
    with pytest.raises(TypeError, match="list or tuple"):
        m(torch.rand(2, 4, 3, 16, 16))
    with pytest.raises(ValueError, match="exactly 2 views; got 3"):
        m([torch.rand(4, 3, 16, 16)] * 3)
    with pytest.raises(ValueError, match="same samples"):
        m([torch.rand(4, 3, 16, 16), torch.rand(5, 3, 16, 16)])
    with pytest.raises(ValueError, match="pseudo_collapse"):
        build_method("simclr", "resnet18", head="d-8-8", pseudo_collapse=float("nan"), **BB)
    with pytest.raises(ValueError, match="n_global_views"):
        build_method("dino", "resnet18", head="d-8-8:gelu:dino=4", n_global_views=1, **BB)


# ---- mixed precision --------------------------------------------------------------------------
@pytest.mark.parametrize("name,objective", [
    ("simclr", lambda a, b: nt_xent(a, b, 0.5)),
    ("vicreg", lambda a, b: vicreg(a, b)),
    ("barlow_twins", lambda a, b: barlow_twins(a, b)),
])
def test_objectives_run_in_float32_under_bf16_autocast(name, objective):
    """Backbone and head run in bf16 under autocast; the loss must equal the objective of the
    (upcast) bf16 head outputs evaluated in float32 outside autocast (to float32 round-off),
    not a bf16 evaluation (which is off by ~1e-2 relative)."""
    torch.manual_seed(0)
    m = build_method(name, "resnet18", head="d-32-32:bn", **BB)
    outputs = []
    m.projector.register_forward_hook(lambda mod, inp, out: outputs.append(out))
    views = [torch.rand(8, 3, 16, 16), torch.rand(8, 3, 16, 16)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m(views)["loss"]
    assert outputs[0].dtype == torch.bfloat16 and loss.dtype == torch.float32
    expected = objective(outputs[0].float(), outputs[1].float())
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-6)


def test_every_method_names_a_registered_objective_and_builds_its_loss_from_the_spec():
    from headgeom.objectives import OBJECTIVES

    for name, cls in METHODS.items():
        assert cls.objective() is OBJECTIVES[cls.OBJECTIVE], name
    m = build_method("simclr", "resnet18", head="d-8-4", temperature=0.3, **BB)
    u, other = torch.randn(5, 4, dtype=torch.float64), torch.randn(5, 4)
    loss = m.analysis_loss(other)  # the method's temperature, the other view cast to u's dtype
    assert loss(u).item() == pytest.approx(nt_xent(u, other.double(), 0.3).item(), rel=1e-14)
    assert loss.diagonal_blocks is not None  # the spec's closed form is declared

    class Bare(SSLMethod):
        name = "bare"

    with pytest.raises(NotImplementedError, match="names no OBJECTIVE"):
        Bare.objective()
