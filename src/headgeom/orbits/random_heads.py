"""The random-head control of the single-run standard (headgeom.claims.single_run; docs/paper.md §2 C9, C11).

What selectivity (compression / global ratio, headgeom.orbits.selective) does a head that learned nothing
show on the same stored backbone features? ``draws`` heads of the trained head's architecture at PyTorch's
default initialisation (seeded: draw j of seed s uses ``control_seed(s, j)``) are applied to the stored z
orbits, fed as the trained head was (raw z, or the paper's z/‖z‖), and every head's selectivity is taken at
every resample row of the trained head's bootstrap (:class:`~headgeom.orbits.bootstrap.Resamples`: B
bootstrap and N leave-one-out rows), so the trained head and the controls' median move together:
``vs_selectivity`` = trained selectivity / median control selectivity, with its BCa interval.

BatchNorm of the controls, two settings (``BN_SETTINGS``), both computed:

- ``"stored"`` (the one rows are judged at): every BatchNorm's running statistics are set, layer by layer in
  eval mode, to the mean and (biased) variance of its input over all stored orbit points
  (:func:`calibrate_batchnorm`), i.e. train mode on the stored set as one batch, then frozen. Why: a BN
  layer's statistics are not weights training learns but estimates of its input's statistics, which a
  trained head carries from its training data; a random head's counterpart is the same estimate on the
  inputs it is applied to (the stored features are the only inputs there are). Why not train mode: each
  point's output would then depend on the batch it is fed with, so the control would not be a fixed
  function of z and a bootstrap resample would change it; with every stored point in one batch train mode
  gives exactly these numbers.
- ``"init"``: the running statistics a fresh BatchNorm has (mean 0, variance 1), so BN is nearly the
  identity: a head that saw no data at all. Swept as the convention's other value.

Pure computation on stored features; the heads run in float32 as the trained head did, metrics in float64.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.heads import HeadSpec, head_from
from headgeom.orbits import metrics as M
from headgeom.orbits import selective as S
from headgeom.orbits.bootstrap import Resamples, estimate, replicate_means
from headgeom.orbits.controls import fresh_head
from headgeom.rng import seeded

__all__ = ["BN_SETTINGS", "calibrate_batchnorm", "control_seed", "excess_increase", "random_head_control",
           "random_heads", "selectivity_rows"]

BN_SETTINGS = {
    "stored": "BatchNorm statistics of each control head estimated on the stored orbit points (one batch, frozen)",
    "init": "BatchNorm at its initial statistics (mean 0, variance 1: nearly the identity)",
}
_BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def control_seed(seed: int, draw: int) -> int:
    """The torch seed of control draw ``draw`` for a run of seed ``seed`` (apart from the fresh-head seeds)."""
    return 100_000 + 1_000 * int(seed) + int(draw)


def random_heads(template: nn.Module | HeadSpec | str, draws: int, seed: int = 0) -> list[nn.Module]:
    """``draws`` heads of ``template``'s architecture at PyTorch's default initialisation, in eval mode:
    a ProjectionHead or module is re-initialised (headgeom.orbits.controls.fresh_head), a HeadSpec or
    head string is built (headgeom.heads.head_from)."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ValueError(f"the random-head control needs draws >= 1 heads; got {draws!r}")
    out = []
    for j in range(draws):
        s = control_seed(seed, j)
        if isinstance(template, (HeadSpec, str)):
            with seeded(s):  # the caller's random stream is left as it was
                head = head_from(template)
        else:
            head = fresh_head(template, s)
        out.append(head.eval())
    return out


@torch.no_grad()
def calibrate_batchnorm(head: nn.Module, inputs: Tensor) -> Tensor:
    """Set every BatchNorm's running statistics to the mean and biased variance of its input when ``head``
    runs on ``inputs`` (B, d) in eval mode, in forward order within one pass (each BN's statistics are set
    from its input just before it runs, so later layers see the calibrated earlier ones): in eval mode each
    BN then standardises its input over these points exactly (module docstring, setting "stored"). In
    place; ``head`` is left in eval mode. Returns the head's output on ``inputs``, calibrated."""
    head.eval()

    def set_stats(bn: nn.Module, args: tuple[Tensor, ...]) -> None:
        x = args[0].detach()
        x = x.transpose(0, 1).reshape(x.shape[1], -1)  # (C, points)
        bn.running_mean.copy_(x.mean(dim=1))
        bn.running_var.copy_(x.var(dim=1, unbiased=False))

    hooks = [m.register_forward_pre_hook(set_stats) for m in head.modules() if isinstance(m, _BN)]
    try:
        return head(inputs)
    finally:
        for h in hooks:
            h.remove()


def _outputs(head: nn.Module, z: Tensor, head_input: str, bns: Sequence[str]) -> dict[str, Tensor]:
    """h(z) of a control head for stored orbits z (N, K, d) under each BatchNorm setting of ``bns`` ->
    {bn: (N, K, D) float64}. "init" runs first (the head as built), "stored" calibrates it in place."""
    unknown = [bn for bn in bns if bn not in BN_SETTINGS]
    if unknown:
        raise ValueError(f"control BatchNorm settings must be among {sorted(BN_SETTINGS)}; got {unknown}")
    if head_input not in ("raw", "l2"):
        raise ValueError(f"head input must be 'raw' or 'l2' (the paper's z/|z|); got {head_input!r}")
    param = next(head.parameters(), None)
    x = z.reshape(-1, z.shape[-1]).to(dtype=param.dtype if param is not None else torch.float32,
                                      device=param.device if param is not None else "cpu")
    x = F.normalize(x, dim=-1) if head_input == "l2" else x
    out = {}
    with torch.no_grad():
        for bn in sorted(bns, key=lambda b: b != "init"):  # init before the calibration changes the head
            y = head.eval()(x) if bn == "init" else calibrate_batchnorm(head, x)
            out[bn] = y.detach().to("cpu", torch.float64).reshape(*z.shape[:-1], -1)
    return out


def selectivity_rows(z: Tensor, h: Tensor, weights: Tensor) -> dict[str, Tensor]:
    """Compression, global ratio and selectivity of h against z (both (N, K, ·), L2-normalised inside) at
    unit weights (entry 0) and at every row of ``weights`` (R, N) (entries 1..R): (1 + R,) float64 each.
    The definitions are headgeom.orbits.selective's (spread of L2-normalised orbit points; global spread)."""
    z, h = z.to(torch.float64), h.to(torch.float64)
    rows = torch.cat([torch.ones(1, z.shape[0], dtype=torch.float64), torch.as_tensor(weights, dtype=torch.float64)])
    parts = []
    for f in (z, h):
        spread = M.orbit_spread(f)
        parts.append((replicate_means(spread, rows), S.global_spread_from_parts(spread, M.l2_normalise(f).mean(1), rows)))
    (sz, gz), (sh, gh) = parts
    comp, glob = sz / sh, gz / gh
    return {"compression": comp, "global_ratio": glob, "selectivity": comp / glob}


def random_head_control(z: Tensor, h: Tensor, template: nn.Module | HeadSpec | str, rs: Resamples, *,
                        head_input: str = "raw", draws: int = 20, seed: int = 0, level: float = 0.95,
                        levels: tuple[float, ...] = (), bn_settings: Sequence[str] = tuple(BN_SETTINGS),
                        keep_rows: bool = False) -> dict[str, Any]:
    """The control of the module docstring for a trained head's output ``h`` (N, K, D) on stored orbits ``z``
    (N, K, d), under the trained head's resamples ``rs``. Per BatchNorm setting: {"draws", "bn" (in words),
    "selectivity" and "compression" (per draw, at unit weights), "vs_selectivity" (estimate of trained /
    median control selectivity, intervals also at ``levels``)}; with ``keep_rows``, also "rows":
    {"trained": trained selectivity at the B + N rows, "<bn>": the controls' median there} (for ratios
    across runs, :func:`excess_increase`)."""
    trained = selectivity_rows(z, h, rs.weights)["selectivity"]
    out: dict[str, Any] = {"head_input": head_input, "trained_selectivity": float(trained[0])}
    rows: dict[str, list[float]] = {"trained": trained[1:].tolist()}
    sel: dict[str, list[Tensor]] = {bn: [] for bn in bn_settings}
    comp: dict[str, list[float]] = {bn: [] for bn in bn_settings}
    for head in random_heads(template, draws, seed):
        for bn, hz in _outputs(head, z, head_input, bn_settings).items():
            r = selectivity_rows(z, hz, rs.weights)
            sel[bn].append(r["selectivity"])
            comp[bn].append(float(r["compression"][0]))
    for bn in bn_settings:
        median = torch.quantile(torch.stack(sel[bn]), 0.5, dim=0)  # (1 + R,), interpolated as numpy
        vs = trained / median
        out[bn] = {"draws": draws, "bn": BN_SETTINGS[bn], "selectivity": [float(s[0]) for s in sel[bn]],
                   "compression": comp[bn], "median_selectivity": float(median[0]),
                   "vs_selectivity": rs.estimate(float(vs[0]), vs[1:], level, levels=levels)}
        rows[bn] = median[1:].tolist()
    if keep_rows:
        out["rows"] = rows
    return out


def excess_increase(by_depth: Mapping[int, Mapping[str, Any]], n_boot: int, strata: Tensor | None = None, *,
                    level: float = 0.95, levels: tuple[float, ...] = (), bn: str = "stored") -> dict[str, Any]:
    """C11's effect for one run: the learned selectivity x_d = trained / median control selectivity of
    each depth's head, and diff = log x(depth max) − log x(depth min) with its BCa interval.

    ``by_depth``: depth -> a :func:`random_head_control` result made with ``keep_rows`` on the SAME
    resamples (the same orbit images and bootstrap rows at every depth: the rows pair): ``n_boot``
    bootstrap rows, then one leave-one-out row per image. ``strata``: the labels the rows were drawn
    within (None: unstratified). Returns {"delta": estimate (``ci_at`` at ``levels``), "excess":
    {depth: x_d}, "trained_delta": log s(max) − log s(min), "control_deltas": [per draw j: log c_j(max) −
    log c_j(min)], "n_images"}."""
    depths = sorted(by_depth)
    if len(depths) < 2:
        raise ValueError(f"an increase with depth needs >= 2 depths; got {depths}")
    lo, hi = by_depth[depths[0]], by_depth[depths[-1]]
    n_rows = {len(c["rows"]["trained"]) for c in by_depth.values()}
    if len(n_rows) != 1:
        raise ValueError(f"the depths' controls were resampled differently ({sorted(n_rows)} rows): they must "
                         "share the orbit images and bootstrap rows")
    n_images = n_rows.pop() - int(n_boot)
    if n_images < 1 or (strata is not None and int(torch.as_tensor(strata).numel()) != n_images):
        raise ValueError(f"{n_images + n_boot} resample rows do not split into n_boot = {n_boot} bootstrap rows and "
                         "one leave-one-out row per image (strata: one label per image)")

    def log_excess(c: Mapping[str, Any]) -> Tensor:
        t = torch.tensor([c["trained_selectivity"], *c["rows"]["trained"]], dtype=torch.float64)
        m = torch.tensor([c[bn]["median_selectivity"], *c["rows"][bn]], dtype=torch.float64)
        return torch.log(t / m)

    diff = log_excess(hi) - log_excess(lo)  # entry 0: the estimate; then the bootstrap and leave-one-out rows
    delta = estimate(float(diff[0]), diff[1:1 + n_boot], level, jackknife=diff[1 + n_boot:], strata=strata,
                     levels=levels)
    ctrl = [math.log(a / b_) if a > 0 and b_ > 0 else math.nan
            for a, b_ in zip(hi[bn]["selectivity"], lo[bn]["selectivity"])]
    return {"delta": delta,
            "excess": {int(d): by_depth[d]["trained_selectivity"] / by_depth[d][bn]["median_selectivity"]
                       for d in depths},
            "trained_delta": math.log(hi["trained_selectivity"] / lo["trained_selectivity"]),
            "control_deltas": ctrl, "n_images": n_images}
