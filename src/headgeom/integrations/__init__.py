"""headgeom inside the tools SSL researchers already train with.

- :class:`GeometryMonitor` (no dependency beyond headgeom): the exact H_eff spectrum, ‖M‖/‖H_eff‖,
  RankMe, spread and covariance condition number of a user's own model on a probe batch, from
  any training loop: ``monitor.step(model, step)``, under the shared tags of :mod:`headgeom.tags`.
- :class:`HeadGeometryCallback` (``pip install -e ".[lightning]"``): the same as a PyTorch
  Lightning callback, logged through the trainer's loggers under ``headgeom/...``.
"""
from headgeom.integrations.monitor import KEYS, GeometryMonitor, Measurement

__all__ = ["GeometryMonitor", "HeadGeometryCallback", "KEYS", "Measurement"]


def __getattr__(name: str):
    # lightning is an optional dependency, and importing it takes seconds: load it on first use
    if name == "HeadGeometryCallback":
        from headgeom.integrations.lightning_callback import HeadGeometryCallback

        return HeadGeometryCallback
    raise AttributeError(f"module 'headgeom.integrations' has no attribute {name!r}")
