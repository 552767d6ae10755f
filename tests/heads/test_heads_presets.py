"""Presets against the official structures, written out here from the sources they quote.

Full-size presets are built on the meta device (structure and parameter counts without
allocating the 150M-parameter VICReg/Barlow expanders).
"""
import inspect

import pytest
import torch
from torch import nn

from headgeom.heads import HEAD_PRESETS, L2Normalize, ProjectionHead, get_head_spec, head_from, parse_head


def describe(head: ProjectionHead) -> list[tuple]:
    out = []
    for m in head.layers:
        if isinstance(m, nn.Linear):
            kind = "WNLinear" if hasattr(m, "parametrizations") else "Linear"
            out.append((kind, m.in_features, m.out_features, m.bias is not None))
        elif isinstance(m, nn.BatchNorm1d):
            out.append(("BN", m.num_features, m.affine))
        elif isinstance(m, nn.LayerNorm):
            out.append(("LN", m.normalized_shape[0]))
        elif isinstance(m, L2Normalize):
            out.append(("L2",))
        else:
            out.append((type(m).__name__,))
    return out


R, G, S = ("ReLU",), ("GELU",), ("SiLU",)

# (preset, kwargs) -> expected sequence, transcribed from the quoted source.
OFFICIAL = {
    # docs/paper.md §3: Linear(d→2048, no bias) → [BN] → act → Linear(2048→2048, no bias) → [BN]
    ("paper_projector", ()): [("Linear", 512, 2048, False), S, ("Linear", 2048, 2048, False)],
    ("paper_projector", (("bn", True), ("activation", "relu"))): [
        ("Linear", 512, 2048, False), ("BN", 2048, True), R, ("Linear", 2048, 2048, False), ("BN", 2048, True)],
    ("paper_projector", (("activation", "linear"),)): [("Linear", 512, 2048, False), ("Linear", 2048, 2048, False)],
    ("paper_projector", (("activation", "gelu"), ("in_dim", 192))): [
        ("Linear", 192, 2048, False), G, ("Linear", 2048, 2048, False)],
    ("paper_predictor", ()): [("Linear", 2048, 512, False), S, ("Linear", 512, 2048, False)],
    ("paper_predictor", (("bn", True), ("activation", "swish"))): [
        ("Linear", 2048, 512, False), ("BN", 512, True), S, ("Linear", 512, 2048, False), ("BN", 2048, True)],
    # SimCLR v1 paper: W2 σ(W1 h), 2048 → 2048 → 128
    ("simclr", ()): [("Linear", 2048, 2048, True), R, ("Linear", 2048, 128, True)],
    ("simclr", (("bn", True),)): [
        ("Linear", 2048, 2048, False), ("BN", 2048, True), R, ("Linear", 2048, 128, False), ("BN", 128, True)],
    # facebookresearch/simsiam builder.py (prev_dim = backbone width)
    ("simsiam_projector", ()): [
        ("Linear", 2048, 2048, False), ("BN", 2048, True), R,
        ("Linear", 2048, 2048, False), ("BN", 2048, True), R,
        ("Linear", 2048, 2048, False), ("BN", 2048, False)],
    ("simsiam_projector", (("in_dim", 512),)): [
        ("Linear", 512, 512, False), ("BN", 512, True), R,
        ("Linear", 512, 512, False), ("BN", 512, True), R,
        ("Linear", 512, 2048, False), ("BN", 2048, False)],
    ("simsiam_predictor", ()): [("Linear", 2048, 512, False), ("BN", 512, True), R, ("Linear", 512, 2048, True)],
    # deepmind-research byol/utils/networks.py MLP
    ("byol", ()): [("Linear", 2048, 4096, True), ("BN", 4096, True), R, ("Linear", 4096, 256, False)],
    ("byol_predictor", ()): [("Linear", 256, 4096, True), ("BN", 4096, True), R, ("Linear", 4096, 256, False)],
    # facebookresearch/vicreg main_vicreg.py Projector
    ("vicreg", ()): [
        ("Linear", 2048, 8192, True), ("BN", 8192, True), R,
        ("Linear", 8192, 8192, True), ("BN", 8192, True), R,
        ("Linear", 8192, 8192, False)],
    # facebookresearch/barlowtwins main.py
    ("barlow_twins", ()): [
        ("Linear", 2048, 8192, False), ("BN", 8192, True), R,
        ("Linear", 8192, 8192, False), ("BN", 8192, True), R,
        ("Linear", 8192, 8192, False)],
    ("barlow_twins", (("projector", "1024-512"),)): [
        ("Linear", 2048, 1024, False), ("BN", 1024, True), R, ("Linear", 1024, 512, False)],
    # facebookresearch/dino vision_transformer.py DINOHead
    ("dino", ()): [
        ("Linear", 384, 2048, True), G, ("Linear", 2048, 2048, True), G, ("Linear", 2048, 256, True),
        ("L2",), ("WNLinear", 256, 65536, False)],
    ("dino", (("use_bn", True), ("nlayers", 2), ("in_dim", 768))): [
        ("Linear", 768, 2048, True), ("BN", 2048, True), G, ("Linear", 2048, 256, True),
        ("L2",), ("WNLinear", 256, 65536, False)],
    ("dino", (("nlayers", 1),)): [("Linear", 384, 256, True), ("L2",), ("WNLinear", 256, 65536, False)],
}


@pytest.mark.parametrize("key", list(OFFICIAL), ids=lambda k: f"{k[0]}{dict(k[1])}")
def test_preset_module_sequence_matches_official(key):
    name, kwargs = key
    head = ProjectionHead(get_head_spec(name, **dict(kwargs)), device="meta")
    assert describe(head) == OFFICIAL[key]


def test_every_preset_has_an_official_structure_test_and_quotes_a_source():
    assert {name for name, _ in OFFICIAL} == set(HEAD_PRESETS)
    for name, fn in HEAD_PRESETS.items():
        doc = inspect.getdoc(fn) or ""
        assert any(src in doc for src in ("docs/paper.md", ".py", "arXiv")), name


# Parameter counts at the sources' default sizes, by explicit arithmetic.
TRUE_COUNTS = {
    "paper_projector": 512 * 2048 + 2048 * 2048,
    "paper_predictor": 2048 * 512 + 512 * 2048,
    "simclr": 2048 * 2048 + 2048 + 2048 * 128 + 128,
    "simsiam_projector": 3 * 2048 * 2048 + 2 * 2 * 2048,
    "simsiam_predictor": 2048 * 512 + 2 * 512 + 512 * 2048 + 2048,
    "byol": 2048 * 4096 + 4096 + 2 * 4096 + 4096 * 256,
    "byol_predictor": 256 * 4096 + 4096 + 2 * 4096 + 4096 * 256,
    "vicreg": (2048 * 8192 + 8192) + 2 * 8192 + (8192 * 8192 + 8192) + 2 * 8192 + 8192 * 8192,
    "barlow_twins": 2048 * 8192 + 2 * 8192 + 8192 * 8192 + 2 * 8192 + 8192 * 8192,
    "dino": (384 * 2048 + 2048) + (2048 * 2048 + 2048) + (2048 * 256 + 256) + 256 * 65536 + 65536,
}


@pytest.mark.parametrize("name", sorted(TRUE_COUNTS))
def test_true_preset_parameter_counts(name):
    spec = get_head_spec(name)
    assert spec.num_parameters() == TRUE_COUNTS[name]  # from the spec alone
    head = ProjectionHead(spec, device="meta")
    assert sum(p.numel() for p in head.parameters()) == TRUE_COUNTS[name]


def test_vicreg_and_barlow_are_about_151m_parameters():
    # a sanity anchor on the arithmetic itself: 2·8192² + 2048·8192 ≈ 1.51e8
    assert 1.50e8 < get_head_spec("vicreg").num_parameters() < 1.52e8
    assert get_head_spec("vicreg").num_parameters() - get_head_spec("barlow_twins").num_parameters() == 2 * 8192


SMALL = {
    "paper_projector": dict(in_dim=6),
    "paper_predictor": dict(in_dim=6, bn=True),
    "simclr": dict(in_dim=6, hidden_dim=10, out_dim=4),
    "simsiam_projector": dict(in_dim=6, dim=8),
    "simsiam_predictor": dict(in_dim=6, pred_dim=3),
    "byol": dict(in_dim=6, hidden_dim=10, out_dim=4),
    "byol_predictor": dict(in_dim=6, hidden_dim=10, out_dim=4),
    "vicreg": dict(in_dim=6, mlp="10-10-4"),
    "barlow_twins": dict(in_dim=6, projector="10-10-4"),
    "dino": dict(in_dim=6, hidden_dim=10, bottleneck_dim=3, out_dim=12),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_presets_forward_and_round_trip(name):
    torch.manual_seed(0)
    spec = get_head_spec(name, **SMALL[name])
    head = ProjectionHead(spec)
    u = head(torch.randn(5, 6))
    assert u.shape == (5, spec.out_dim) and torch.isfinite(u).all()
    assert parse_head(spec.to_string()) == spec
    assert head_from(name, **SMALL[name]).spec == spec
    assert sum(p.numel() for p in head.parameters()) == spec.num_parameters()


def test_small_preset_counts_by_formula():
    c = lambda name: sum(p.numel() for p in ProjectionHead(get_head_spec(name, **SMALL[name])).parameters())
    assert c("paper_projector") == 6 * 2048 + 2048 * 2048
    assert c("paper_predictor") == 6 * 512 + 2 * 512 + 512 * 6 + 2 * 6
    assert c("simclr") == 6 * 10 + 10 + 10 * 4 + 4
    assert c("simsiam_projector") == 6 * 6 + 2 * 6 + 6 * 6 + 2 * 6 + 6 * 8
    assert c("simsiam_predictor") == 6 * 3 + 2 * 3 + 3 * 6 + 6
    assert c("byol") == 6 * 10 + 10 + 2 * 10 + 10 * 4
    assert c("vicreg") == (6 * 10 + 10 + 20) + (10 * 10 + 10 + 20) + 10 * 4
    assert c("barlow_twins") == (6 * 10 + 20) + (10 * 10 + 20) + 10 * 4
    assert c("dino") == (6 * 10 + 10) + (10 * 10 + 10) + (10 * 3 + 3) + 12 * 3 + 12


def test_get_head_spec_errors():
    with pytest.raises(ValueError, match=r"unknown head preset 'simclr2'.*barlow_twins"):
        get_head_spec("simclr2")
    with pytest.raises(TypeError, match=r"takes no argument\(s\) \['hidden'\].*in_dim"):
        get_head_spec("byol", hidden=5)
    with pytest.raises(ValueError, match="ints joined by '-'"):
        get_head_spec("vicreg", mlp="8192x8192")
    with pytest.raises(ValueError, match="unknown activation"):
        get_head_spec("paper_projector", activation="sigmoid")
