"""Controls for orbit compression (docs/paper.md §3 "Orbits").

- A freshly initialised head of the same architecture: how much of the compression a trained
  head shows is architecture alone (ProjectionHeads are rebuilt from their HeadSpec; any other
  module is deep-copied and every submodule's ``reset_parameters`` is called), seeded.
- Random-direction perturbations of equal size: each orbit's points are replaced by its mean
  plus random (Gaussian, isotropic) displacements, centred over the orbit and scaled so the
  orbit's within-orbit sum of squares ‖Z_i − m_i‖_F² in z is exactly the real one. A head
  that compresses augmentation directions *selectively* compresses these much less.

Both controls run the heads on the stored z orbits, so they cost no backbone pass.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from headgeom.heads import ProjectionHead, head_from
from headgeom.orbits.extract import eval_mode, run_points
from headgeom.rng import seeded

__all__ = ["fresh_head", "fresh_heads", "head_points_on", "random_direction_orbits"]


def fresh_head(head: Callable, seed: int = 0) -> nn.Module:
    """A freshly initialised copy of ``head`` (same architecture, device and dtype), seeded."""
    if not isinstance(head, nn.Module):
        raise TypeError(f"a fresh-head control needs an nn.Module head, got {type(head).__name__}")
    param = next(head.parameters(), None)
    with seeded(int(seed)):  # the caller's random stream is left as it was
        if isinstance(head, ProjectionHead):
            kw = {} if param is None else {"device": param.device, "dtype": param.dtype}
            return head_from(head.spec, **kw)
        new = copy.deepcopy(head)
        n_reset = 0
        for m in new.modules():
            if hasattr(m, "reset_parameters") and callable(m.reset_parameters):
                m.reset_parameters()
                n_reset += 1
            elif hasattr(m, "reset_running_stats"):
                m.reset_running_stats()
        if n_reset == 0 and param is not None:
            raise TypeError(f"cannot re-initialise {type(head).__name__}: none of its modules has "
                            f"reset_parameters(); pass a ProjectionHead or standard torch layers")
        return new


def fresh_heads(chain: Sequence[tuple[str, Callable]], seed: int = 0) -> list[tuple[str, nn.Module]]:
    """Fresh copies of a head chain (seed + position for each)."""
    return [(name, fresh_head(h, seed + i)) for i, (name, h) in enumerate(chain)]


def random_direction_orbits(z: Tensor, seed: int = 0) -> Tensor:
    """Orbits of equal per-orbit size in random directions. z (N, K, d) -> (N, K, d) float32.

    z̃_ik = m_i + s_i · (r_ik − r̄_i), r ~ N(0, I), s_i = ‖Z_i − m_i‖_F / ‖R_i − r̄_i‖_F, so each
    orbit keeps its mean and its within-orbit sum of squares (hence its raw within-orbit trace).
    """
    if not isinstance(z, Tensor) or z.ndim != 3 or z.shape[1] < 2:
        shape = tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(f"z orbits must have shape (N, K >= 2, d), got {shape}")
    z64 = z.detach().to(torch.float64)
    mean = z64.mean(dim=1, keepdim=True)
    size = (z64 - mean).pow(2).sum(dim=(1, 2)).sqrt()  # (N,)
    gen = torch.Generator().manual_seed(int(seed))
    r = torch.randn(z.shape, generator=gen, dtype=torch.float64)
    r = r - r.mean(dim=1, keepdim=True)
    r = r * (size / r.pow(2).sum(dim=(1, 2)).sqrt())[:, None, None]
    return (mean + r.to(z64.device)).to(z.dtype)


def head_points_on(z: Tensor, chain: Sequence[tuple[str, Callable]], variants: Sequence[str],
                   batch_size: int = 4096, device: torch.device | str = "cpu") -> dict[str, Tensor]:
    """Every feature point of heads applied to stored representations.

    z: (N, K, d) orbits or (N, d); returns name -> (N, K, D) or (N, D) float32 CPU ("z" included).
    """
    lead = z.shape[:-1]
    flat = z.reshape(-1, z.shape[-1])
    parts: dict[str, list[Tensor]] = {}
    with eval_mode([h for _, h in chain]), torch.no_grad():
        for start in range(0, flat.shape[0], batch_size):
            zb = flat[start:start + batch_size].to(device)
            for p, v in run_points(zb, list(chain), variants).items():
                parts.setdefault(p, []).append(v.float().cpu())
    return {p: torch.cat(v).reshape(*lead, -1) for p, v in parts.items()}
