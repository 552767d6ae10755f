"""Which release a checkpoint comes from, told by its container, keys and shapes (docs/paper.md §4.10).

Layouts recognised (``release`` ids):

- ``dino_vit`` / ``dino_resnet50``: DINO full checkpoint ``{student, teacher, optimizer, epoch,
  args, dino_loss, ...}``; each of student/teacher holds ``backbone.*`` and ``head.mlp.{i}.*``,
  ``head.last_layer.*`` (student keys, and the ResNet-50 teacher's, prefixed ``module.``). The
  ViT head's last layer is weight-normed (``weight_g``/``weight_v``); the ResNet-50 release's
  head is 2048→4096, BN, GELU, →256 with a plain last Linear to 60000 (it differs from the DINO
  code: https://github.com/facebookresearch/dino/issues/189).
- ``vicreg``: ``{epoch, model, optimizer}``, ``module.backbone.*`` and
  ``module.projector.{0,1,3,4,6}`` (Linears with bias except the last). VICReg's own resnet.py
  pads by 1 and then convolves conv1 with padding 2, the same zero padding of 3 as torchvision,
  and has torchvision's key names without ``fc``.
- ``barlow_twins``: the same container, bias-free projector, plus the loss's ``module.bn.*``.
- ``simsiam``: ``{epoch, arch, state_dict, optimizer}``, ``module.encoder.*`` (torchvision
  ResNet whose ``fc`` is the projector) and ``module.predictor.*``.
- ``torchvision_resnet`` / ``vit_backbone``: a bare backbone state dict (optionally inside
  ``state_dict``/``model``, optionally prefixed ``module.``/``backbone.``); ``fc.*`` is a classifier.

headgeom's own training runs (``format == "headgeom.train.checkpoint"``) are rebuilt from their
config instead, by :mod:`headgeom.checkpoints.own_runs`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from torch import Tensor

from headgeom.checkpoints.heads_from_state import (
    CheckpointArchitectureError,
    SeqModule,
    module_of,
    sequential_modules,
    spec_from_modules,
)
from headgeom.checkpoints.infer_backbone import infer_backbone
from headgeom.heads import HeadSpec, get_head_spec

__all__ = ["CheckpointArchitectureError", "HeadPart", "Layout", "detect", "RELEASES"]

RELEASES = ("dino_vit", "dino_resnet50", "dino_resnet18", "vicreg", "barlow_twins", "simsiam",
            "torchvision_resnet", "vit_backbone")
"""Release ids of files read by :func:`detect`; headgeom's own runs are ``headgeom_<method>``."""


@dataclass
class HeadPart:
    """A head read from a checkpoint: its spec and the official modules' tensors, in order.

    ``last`` is the DINO last layer; ``heads_from_state.head_state`` renames the tensors to the
    keys of the ``ProjectionHead(spec)`` once it is built.
    """

    spec: HeadSpec
    modules: list[SeqModule]
    last: SeqModule | None = None


@dataclass
class Layout:
    """Everything needed to build and fill the models of one checkpoint."""

    release: str
    backbone_name: str  # "resnet18", "resnet50" or "vit"
    backbone_kwargs: dict[str, Any]
    backbone_state: dict[str, Tensor]
    head: HeadPart | None = None
    predictor: HeadPart | None = None
    unused: list[str] = field(default_factory=list)  # model tensors that belong to no built part
    ignored: dict[str, str] = field(default_factory=dict)  # known entries deliberately not loaded
    notes: list[str] = field(default_factory=list)


def _is_tensor_dict(x: Any) -> bool:
    return isinstance(x, Mapping) and len(x) > 0 and all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in x.items())


def _strip(state: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Remove ``prefix`` from every key that has it."""
    n = len(prefix)
    return {(k[n:] if k.startswith(prefix) else k): v for k, v in state.items()}


def _take(state: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """Pop the keys under ``prefix`` from ``state`` and return them without it."""
    n = len(prefix)
    keys = [k for k in state if k.startswith(prefix)]
    return {k[n:]: state.pop(k) for k in keys}


def _summary(obj: Any) -> str:
    if isinstance(obj, Mapping):
        keys = list(obj)
        shown = ", ".join(repr(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"a dict with {len(keys)} keys ({shown})"
    return f"a {type(obj).__name__}"


def _unrecognised(obj: Any, why: str) -> CheckpointArchitectureError:
    return CheckpointArchitectureError(
        f"cannot tell which release this checkpoint is from: {why}. It holds {_summary(obj)}. headgeom "
        f"reads DINO full checkpoints, VICReg resnet50_fullckpt.pth, Barlow Twins checkpoint.pth, "
        f"SimSiam checkpoint_0099.pth.tar and plain ResNet-18/50 or ViT state dicts."
    )


def _preset_note(spec: HeadSpec, preset: str, expected: HeadSpec) -> str:
    same = "matches" if spec == expected else "differs from"
    return f"head {spec.to_string()!r} {same} headgeom's {preset!r} preset {expected.to_string()!r}."


def _args_dict(args: Any) -> dict[str, Any]:
    d = getattr(args, "__dict__", None)
    return dict(d) if isinstance(d, dict) else (dict(args) if isinstance(args, Mapping) else {})


def _dino(obj: Mapping[str, Any], which: str | None, num_heads: int | None) -> Layout:
    which = which or "teacher"
    if which not in ("teacher", "student"):
        raise ValueError(f"which must be 'teacher' or 'student' for a DINO checkpoint, got {which!r}.")
    part = obj[which]
    if not _is_tensor_dict(part):
        raise _unrecognised(obj, f"its {which!r} entry is {_summary(part)}, not a state dict")
    state = _strip(part, "module.")
    backbone = _take(state, "backbone.")
    head = _take(state, "head.")
    name, kwargs, notes = infer_backbone(backbone, num_heads=num_heads)
    release = f"dino_{name}"  # dino_vit, dino_resnet50 (the official files) or dino_resnet18
    args = _args_dict(obj.get("args"))
    notes.insert(0, f"DINO full checkpoint: loaded the {which} (DINO evaluates the teacher; pass "
                    f"which='student' or 'teacher').")
    if args:
        shown = {k: args[k] for k in ("arch", "patch_size", "out_dim", "norm_last_layer", "use_bn_in_head",
                                      "epochs") if k in args}
        notes.append(f"training args in the file: {shown}.")
    head_part = None
    last_tensors = _take(head, "last_layer.")
    mlp = _take(head, "mlp.")
    if mlp and last_tensors:
        mods = sequential_modules(mlp, "head.mlp")
        last = module_of("head.last_layer", last_tensors)
        g = last.tensors.get("weight_g")
        frozen = bool(args.get("norm_last_layer", True)) if g is None else bool((g == 1).all())
        spec = spec_from_modules(mods, "gelu", "head.mlp", last=last, norm_last_layer=frozen)
        head_part = HeadPart(spec, mods, last)
        if last.kind == "linear":
            notes.append("the last layer is a plain Linear (not weight-normed, unlike the DINO code); it is "
                         "loaded exactly as weight_norm with g = its row norms, v = its weight. The file does "
                         "not say whether the bottleneck was L2-normalised; headgeom's DINO head normalises "
                         "it, as DINOHead.forward does.")
    elif mlp or last_tensors:
        notes.append("incomplete DINO head (it needs both head.mlp.* and head.last_layer.*); head not built.")
        head.update({f"mlp.{k}": v for k, v in mlp.items()})
        head.update({f"last_layer.{k}": v for k, v in last_tensors.items()})
    else:
        notes.append("no DINO head tensors (head.mlp.*, head.last_layer.*) in the file; head not built.")
    other = "student" if which == "teacher" else "teacher"
    ignored = {other: "the other network of the pair", **{
        k: "training state" for k in obj if k not in ("student", "teacher")}}
    unused = [f"{which}.head.{k}" for k in head] + [f"{which}.{k}" for k in state]
    return Layout(release, name, kwargs, backbone, head_part, None, unused=unused, ignored=ignored, notes=notes)


def _vicreg_or_barlow(obj: Mapping[str, Any], num_heads: int | None) -> Layout:
    state = _strip(obj["model"], "module.")
    backbone = _take(state, "backbone.")
    projector = _take(state, "projector.")
    loss_bn = _take(state, "bn.")
    name, kwargs, notes = infer_backbone(backbone, num_heads=num_heads)
    mods = sequential_modules(projector, "projector")
    linear_bias = any(m.has_bias for m in mods if m.kind == "linear")
    release = "barlow_twins" if loss_bn or not linear_bias else "vicreg"
    spec = spec_from_modules(mods, "relu", "projector")
    preset_mlp = "-".join(str(w) for w in spec.widths[1:])
    if release == "vicreg":
        notes.append(_preset_note(spec, "vicreg", get_head_spec("vicreg", in_dim=spec.in_dim, mlp=preset_mlp)))
    else:
        notes.append(_preset_note(spec, "barlow_twins",
                                  get_head_spec("barlow_twins", in_dim=spec.in_dim, projector=preset_mlp)))
    ignored = {k: "training state" for k in obj if k != "model"}
    if loss_bn:
        ignored["model.bn.*"] = "the Barlow Twins loss's affine-free BatchNorm on z (not part of the projector)"
    if "epoch" in obj:
        notes.append(f"{release} checkpoint saved at epoch {obj['epoch']}.")
    return Layout(release, name, kwargs, backbone, HeadPart(spec, mods), None,
                  unused=[f"model.{k}" for k in state], ignored=ignored, notes=notes)


def _simsiam(obj: Mapping[str, Any], num_heads: int | None) -> Layout:
    state = _strip(obj["state_dict"], "module.")
    if any(k.startswith(("encoder_q.", "encoder_k.")) for k in state):
        raise _unrecognised(obj, "it is a MoCo checkpoint (encoder_q/encoder_k), which headgeom does not read")
    encoder = _take(state, "encoder.")
    fc = _take(encoder, "fc.")
    predictor = _take(state, "predictor.")
    if not encoder or not fc:
        raise _unrecognised(obj, "a {arch, state_dict} file without module.encoder.* and module.encoder.fc.*")
    name, kwargs, notes = infer_backbone(encoder, num_heads=num_heads)
    arch = obj.get("arch")
    if isinstance(arch, str) and arch != name:
        notes.append(f"the file says arch={arch!r}, its tensors are those of headgeom's {name!r}.")
    mods = sequential_modules(fc, "encoder.fc")
    spec = spec_from_modules(mods, "relu", "encoder.fc")
    notes.append("projector = encoder.fc (SimSiam builder.py); its output Linear keeps the official bias.")
    pred_part = None
    if predictor:
        pmods = sequential_modules(predictor, "predictor")
        pspec = spec_from_modules(pmods, "relu", "predictor")
        pred_part = HeadPart(pspec, pmods)
    ignored = {k: "training state" for k in obj if k != "state_dict"}
    return Layout("simsiam", name, kwargs, encoder, HeadPart(spec, mods), pred_part,
                  unused=[f"state_dict.{k}" for k in state], ignored=ignored, notes=notes)


def _plain(obj: Any, num_heads: int | None) -> Layout:
    state = obj
    if isinstance(obj, Mapping) and not _is_tensor_dict(obj):
        inner = [k for k in ("state_dict", "model", "teacher") if _is_tensor_dict(obj.get(k))]
        if not inner:
            raise _unrecognised(obj, "no state dict of tensors found at the top level or under "
                                     "'state_dict' / 'model'")
        state = obj[inner[0]]
    if not _is_tensor_dict(state):
        raise _unrecognised(obj, "it is not a state dict")
    state = dict(state)
    unused: list[str] = []
    if all(k.startswith("module.") for k in state):
        state = _strip(state, "module.")
    if any(k.startswith("backbone.") for k in state):  # e.g. a DINO teacher saved on its own
        rest = state
        state = _take(rest, "backbone.")
        head = _take(rest, "head.")
        unused = list(rest)
    else:
        if all(k.startswith("encoder.") for k in state):
            state = _strip(state, "encoder.")
        head = _take(state, "head.")
    classifier = _take(state, "fc.")
    name, kwargs, notes = infer_backbone(state, num_heads=num_heads)
    ignored = {}
    if classifier:
        shape = tuple(classifier["weight"].shape) if "weight" in classifier else ()
        ignored["fc.*"] = f"a classifier {shape}, not a projection head"
    if head:
        ignored["head.*"] = "a head whose layout is not known for a plain state dict"
    release = "vit_backbone" if name == "vit" else "torchvision_resnet"
    return Layout(release, name, kwargs, state, None, None, unused=unused, ignored=ignored, notes=notes)


def detect(obj: Any, which: str | None = None, num_heads: int | None = None) -> Layout:
    """Tell the release of an unpickled checkpoint and split it into backbone / head tensors.

    Args:
        obj: what :func:`headgeom.runs.safe_load.safe_load` returned as ``.obj``.
        which: ``"teacher"`` (default) or ``"student"`` for DINO full checkpoints; must be None otherwise.
        num_heads: ViT attention heads (not visible in the tensors; default embed_dim // 64, DINO's rule).

    Raises:
        CheckpointArchitectureError: no known layout, or shapes no headgeom model has.
    """
    if isinstance(obj, Mapping) and "teacher" in obj and "student" in obj:
        return _dino(obj, which, num_heads)
    if which is not None:
        raise ValueError(f"which={which!r} applies only to DINO full checkpoints (student/teacher); "
                         f"this file holds {_summary(obj)}. Leave which=None.")
    if isinstance(obj, Mapping) and _is_tensor_dict(obj.get("model")) and "optimizer" in obj and any(
            ".projector." in f".{k}" for k in obj["model"]):
        return _vicreg_or_barlow(obj, num_heads)
    if isinstance(obj, Mapping) and _is_tensor_dict(obj.get("state_dict")) and "arch" in obj:
        return _simsiam(obj, num_heads)
    return _plain(obj, num_heads)

