"""MethodSpec: everything needed to rebuild an SSL method, as a JSON-able frozen dataclass.

``headgeom.methods.build_method_from_spec(spec)`` rebuilds the same architecture; with
``method.load_state_dict(state)`` the rebuilt method is the saved one. Heads are stored in
their canonical compact form (``HeadSpec.to_string``), which round-trips exactly.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

CUSTOM_BACKBONE = "custom"


@dataclass(frozen=True)
class MethodSpec:
    """A resolved SSL method.

    name: method name (``headgeom.methods.METHODS``).
    backbone: backbone registry name, or ``"custom"`` for a module passed by the caller
      (rebuilding then needs that module again: ``build_method_from_spec(spec, backbone=module)``).
    backbone_options: keyword options of ``headgeom.backbones.get_backbone``.
    feature_dim: width d of the backbone representation z.
    head: projector as a canonical compact head string (first width = feature_dim).
    predictor: predictor compact string (SimSiam, BYOL), else None.
    pseudo_collapse: α of the pseudo-collapsed initialisation (projector Linear weights ×α), or None.
    collapse: the depth of the induced collapse (a fixed offset after the projector's last layer,
      :mod:`headgeom.heads.offset`, sized by :func:`headgeom.train.collapse.calibrate_offset`), or None.
    options: the method's hyper-parameters with every default filled in.
    """

    name: str
    backbone: str
    backbone_options: Mapping[str, Any] = field(default_factory=dict)
    feature_dim: int = 0
    head: str = ""
    predictor: str | None = None
    pseudo_collapse: float | None = None
    collapse: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-able dict (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MethodSpec":
        """The inverse of :meth:`to_dict`; unknown keys raise."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"MethodSpec got unknown field(s) {unknown}; fields are {sorted(names)}")
        return cls(**{k: (dict(v) if isinstance(v, Mapping) else v) for k, v in data.items()})
