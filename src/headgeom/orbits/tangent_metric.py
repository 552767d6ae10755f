"""The metric the head puts on augmentation tangents of a real model (docs/paper.md §2 C6, C7).

For each image x and family t_ξ, at ξ0 (the family's tangent point: its identity, σ = 1 for blur):

- pixel tangent u = ∂t_ξ(x)/∂ξ ([0, 1] pixels, before mean/std) and z-tangent t = ∂f(n(t_ξ(x)))/∂ξ,
  one jvp (:func:`headgeom.geometry.invariance.tangents.augmentation_tangent`), checked against a central
  finite difference of the same path (reported, never silently trusted: kinks of ReLU and of
  colour clamping at saturated pixels make them differ);
- Rayleigh quotients vᵀAv/‖v‖² on the tangent and on ``n_random`` random unit directions:
  ``head_G``: A = J_hᵀJ_h at z (z-space); ``head_loss``: A = J_hᵀ ∇²_u L J_h for the analysis
  loss to a fixed target (ambient reading, per-sample loss); ``backbone``: A = J_bᵀJ_b in pixel
  space, b = f∘n (the tangent's quotient is ‖t‖²/‖u‖²); ``end_to_end``: A = (J_h J_b)ᵀ(J_h J_b)
  on the same pixel directions as ``backbone``;
- Fisher ranks (C7) under y = g(θ) + ε, ε ~ N(0, σ²I), I = J_gᵀJ_g/σ² (ranks do not depend on
  σ): I_h(z) = J_hᵀJ_h (d × d, the information h(z) carries about z) and, on a local chart
  θ = (ξ, r_1..r_m) of pixel space through t_ξ0(x), x(θ) = t_{ξ0+ξ/‖u‖}(x) + Σ_j r_j e_j (e_j the
  random unit pixel directions, ξ rescaled so every coordinate moves pixels at unit speed),
  I_z(θ) from J_z = [t/‖u‖, J_b e_j] and I_h(θ) from J_h J_z. Thm 5.3 predicts rank I_h(θ) ≤
  rank I_z(θ) − 1 when the head is invariant along the family (dim V_aug = 1 per family).

Everything runs in ``dtype`` (float64 by default) on copies of the modules in eval mode.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.func import jvp
from torch.nn.attention import SDPBackend, sdpa_kernel

from headgeom.augment.families import AugmentationFamily, get_family
from headgeom.eval.features import as_head_chain
from headgeom.geometry.engine.loss_curvature import curvature_for
from headgeom.geometry.invariance.pullback_gram import pullback_gram
from headgeom.geometry.invariance.tangents import augmentation_tangent, random_unit_directions
from headgeom.objectives import analysis_loss
from headgeom.orbits.extract import as_unit_images
from headgeom.orbits.tangent_summary import DEFINITIONS, assemble_result
from headgeom.threads import torch_threads

__all__ = ["DEFINITIONS", "LOSSES", "TOL_SWEEP", "tangent_metric_analysis"]  # DEFINITIONS re-exported

LOSSES = ("negative_cosine", "mse")
TOL_SWEEP = (1e-4, 1e-6, 1e-8)
IDENTITY_ULPS = 64  # t_ξ0(x) within 64·eps(dtype) of x shares the clean image's base point



def _unit_images(images: Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    if not isinstance(images, Tensor) or images.ndim != 4 or images.shape[1] != 3:
        shape = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"images must be an RGB batch (N, 3, H, W) of uint8 or [0, 1] floats; got {shape}")
    if images.dtype == torch.uint8:
        return images.to(device=device, dtype=dtype) / 255.0
    as_unit_images(images)  # the same checks (range, dtype) as orbit extraction
    return images.to(device=device, dtype=dtype)


def _prepared(fn: Callable, dtype: torch.dtype) -> Callable:
    """A frozen eval-mode copy of a module in ``dtype`` (callables pass through)."""
    if not isinstance(fn, nn.Module):
        return fn
    m = copy.deepcopy(fn).to(dtype).eval()
    m.requires_grad_(False)
    return m


def _device_of(fn: Callable, fallback: torch.device) -> torch.device:
    if isinstance(fn, nn.Module):
        for p in fn.parameters():
            return p.device
    return fallback


def _xi0_for(fam: AugmentationFamily, xi0: float | Mapping[str, float] | None) -> float:
    if xi0 is None:
        return fam.tangent_point
    if isinstance(xi0, Mapping):
        return float(xi0.get(fam.name, fam.tangent_point))
    return float(xi0)


def _fd_step(fam: AugmentationFamily, dtype: torch.dtype) -> float:
    """sqrt(eps) × the range: small enough to rarely straddle a ReLU kink, above round-off."""
    return torch.finfo(dtype).eps ** 0.5 * (fam.range[1] - fam.range[0])


def _check_args(families: Sequence[str], xi0, loss: str, n_random: int, rel_tol: float, mean, std,
                batch_size: int) -> list[AugmentationFamily]:
    if isinstance(families, str) or not isinstance(families, Sequence) or len(families) == 0:
        raise ValueError(f"families must be a non-empty list of family names, e.g. ['rotation', 'hue']; "
                         f"got {families!r}")
    fams = [get_family(f) for f in families]  # ValueError names the unknown one and lists the rest
    if len({f.name for f in fams}) != len(fams):
        raise ValueError(f"families must be distinct; got {[f.name for f in fams]}")
    if isinstance(xi0, Mapping) and set(xi0) - {f.name for f in fams}:
        raise ValueError(f"xi0 names families that are not analysed: {sorted(set(xi0) - {f.name for f in fams})}; "
                         f"analysed: {[f.name for f in fams]}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES} (per-sample losses with a fixed target and a "
                         f"declared Hessian); got {loss!r}")
    for name, v, lo in (("n_random", n_random, 1), ("batch_size", batch_size, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}; got {v!r}")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be in (0, 1), e.g. 1e-6; got {rel_tol!r}")
    if (mean is None) != (std is None):
        raise ValueError(f"give both mean and std or neither; got mean={mean}, std={std}")
    if mean is not None and (len(mean) != 3 or len(std) != 3 or min(std) <= 0):
        raise ValueError(f"mean and std need 3 per-channel values with std > 0; got mean={mean}, std={std}")
    return fams


def _rows(out: Tensor, b: int, what: str) -> Tensor:
    if not isinstance(out, Tensor) or out.ndim != 2 or out.shape[0] != b:
        shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"the {what} must return 2-D features (B, D) for a batch of B = {b}; got {shape} "
                         f"(flatten or pool its output)")
    return out


def _jvp_rows(fn: Callable[[Tensor], Tensor], at: Tensor, dirs: Tensor, chunk: int) -> tuple[Tensor, Tensor]:
    """fn and its jvp at each row of ``at`` (b, ...) along dirs (b, M, ...): ((b, D), (b, M, D)).

    Rows are replicated M times and pushed through fn in chunks of ``chunk`` rows (fn row-wise)."""
    b, m = dirs.shape[:2]
    rep = at.repeat_interleave(m, dim=0)  # a fresh tensor: jvp refuses overlapping (expanded) primals
    flat = dirs.reshape(b * m, *at.shape[1:])
    outs, tans = [], []
    for s in range(0, b * m, chunk):
        o, t = jvp(fn, (rep[s:s + chunk],), (flat[s:s + chunk],))
        outs.append(o)
        tans.append(t)
    out, tan = torch.cat(outs), torch.cat(tans)
    return out.reshape(b, m, -1)[:, 0], tan.reshape(b, m, -1)


def _quotient(num: Tensor, den: Tensor) -> Tensor:
    return torch.where(den > 0, num / den.clamp_min(torch.finfo(den.dtype).tiny), torch.nan)


def _null_fractions(lam: Tensor, vecs: Tensor, v: Tensor, tol: float) -> Tensor:
    """‖P_null v‖²/‖v‖² for v (b, M, d) in the eigenbasis (lam (b, d), vecs (b, d, d))."""
    null = (lam <= tol * lam.amax(-1, keepdim=True)).to(v.dtype)
    coeff = (v @ vecs).square()
    return (coeff * null.unsqueeze(1)).sum(-1) / coeff.sum(-1)


def _base_point(pix_to_z: Callable, head_fn: Callable | None, head_gram: Callable | None, x_pt: Tensor,
                e_pix: Tensor, e_z: Tensor | None, c: Tensor | None, loss: str, chunk: int) -> dict:
    """Everything at one base point x_pt (b, 3, H, W) that does not depend on the family.

    z (b, d); jb_e = J_b e (b, m, d) for the random pixel directions; with a head: jv_r =
    J_h [e_z, J_b e] (b, 2m, k), the loss-curvature blocks at u = h(z) (checked against the exact
    HVP), the per-sample loss quotients of e_z (b, m), and the eigen-system of I_h(z) = J_hᵀJ_h
    (``head_gram``: headgeom.geometry.invariance.pullback_gram, through the last Linear for DINO heads). Its
    eigenvalues come from eigh of the formed matrix (about 10x faster than the SVD of J on CPU),
    resolved to about d·eps·λ_max (protocol.fisher.eigen_floor).
    """
    z, jb_e = _jvp_rows(pix_to_z, x_pt, e_pix, chunk)
    out = {"z": z, "jb_e": jb_e}
    if head_fn is None:
        return out
    b, m = e_z.shape[:2]
    u, jv_r = _jvp_rows(head_fn, z, torch.cat([e_z, jb_e], 1), chunk)
    # Per-sample loss: the declared blocks of the batch mean, times b (checked against the exact HVP).
    curv = curvature_for(analysis_loss(loss, c), u, "ambient", check=True)
    loss_r = torch.stack([(jv_r[:, j] * curv.apply(jv_r[:, j])).sum(-1) for j in range(m)], 1) * b
    gram = head_gram(z)
    # One thread: a batched eigh of a rank-deficient (b, d, d) Gram (a DINO head: rank <= 256 of
    # d = 384) took 5-34 s with 2 threads on the shared 2-core machine, 0.55 s with 1 (headgeom.threads).
    with torch_threads(1):
        eig = torch.linalg.eigh(gram)
    out.update(u=u, jv_r=jv_r, curv=curv, loss_r=loss_r, eig=eig)
    return out


def tangent_metric_analysis(backbone: Callable[[Tensor], Tensor], head: Callable[[Tensor], Tensor] | None,
                            images: Tensor, families: Sequence[str], *,
                            xi0: float | Mapping[str, float] | None = None, loss: str = "negative_cosine",
                            n_random: int = 8, rel_tol: float = 1e-6, mean: Sequence[float] | None = None,
                            std: Sequence[float] | None = None, seed: int = 0,
                            dtype: torch.dtype = torch.float64, batch_size: int = 16) -> dict:
    """Tangent metric (C6) and Fisher ranks (C7) of ``backbone`` and ``head`` on augmentation tangents.

    Args:
        backbone: images (B, 3, H, W) -> z (B, d), row-wise (run on an eval-mode copy in ``dtype``).
        head: (B, d) -> (B, k) (a module, a callable, or a chain {name: head}), or None for the
            backbone rows only.
        images: uint8 (N, 3, H, W) or float pixels in [0, 1].
        families: registered family names (headgeom.augment.families).
        xi0: the point of the tangent: None (each family's tangent point), a number, or {family: value}.
        loss: the analysis loss of ``head_loss``: ``negative_cosine`` (−cos(u, c)) or ``mse``
            (½‖u − c‖²), per sample, with c = h(f(n(x))) of the un-augmented image held fixed.
        n_random: random unit directions per image (z-space and pixel space each).
        rel_tol: the numerical-rank tolerance (relative to λ_max), also in the sweep TOL_SWEEP.
        mean, std: per-channel normalisation n applied after the augmentation (None: none).
        seed: seeds the random directions and the bootstrap (results depend on batch_size too).
        batch_size: images per batch; jvps run in chunks of batch_size rows.
    Returns:
        JSON-able {"protocol", "definitions", "families": {family: {"head_G", "head_loss",
        "backbone", "end_to_end", "fisher", "tangent_check", "xi0", "units"}}}; head entries are
        None when head is None. See DEFINITIONS.
    """
    fams = _check_args(families, xi0, loss, n_random, rel_tol, mean, std, batch_size)
    device = _device_of(backbone, images.device if isinstance(images, Tensor) else torch.device("cpu"))
    x_all = _unit_images(images, dtype, device)
    bb = _prepared(backbone, dtype)
    chain = [(name, _prepared(h, dtype)) for name, h in as_head_chain(head)]

    def head_fn(z: Tensor) -> Tensor:
        for _, h in chain:
            z = h(z)
        return z

    head_gram = pullback_gram([h for _, h in chain]) if chain else None  # the last layer's QR, once
    if mean is not None:
        m_ = torch.tensor(mean, dtype=dtype, device=device).view(1, 3, 1, 1)
        s_ = torch.tensor(std, dtype=dtype, device=device).view(1, 3, 1, 1)

    def pix_to_z(y: Tensor) -> Tensor:
        return _rows(bb((y - m_) / s_ if mean is not None else y), y.shape[0], "backbone")

    tols = sorted({*TOL_SWEEP, float(rel_tol)}, reverse=True)
    gen = torch.Generator().manual_seed(int(seed))
    m = n_random
    acc: dict[str, dict[str, list]] = {f.name: {} for f in fams}

    def add(fam: str, key: str, value: Tensor) -> None:
        acc[fam].setdefault(key, []).append(value.detach().cpu())

    dims = {"d": None, "k": None}
    # Forward-mode AD has no rule for the fused attention kernels (ViT backbones): use the math one.
    with sdpa_kernel([SDPBackend.MATH]):
        for start in range(0, x_all.shape[0], batch_size):
            x = x_all[start:start + batch_size]
            b = x.shape[0]
            # One set of random directions per image, shared by every family (same control distribution).
            e_pix = random_unit_directions((b, m, *x.shape[1:]), gen, dtype, sample_dims=3).to(device)
            z_clean = pix_to_z(x)
            dims["d"] = z_clean.shape[1]
            e_z = random_unit_directions((b, m, dims["d"]), gen, dtype).to(device) if chain else None
            c = _rows(head_fn(z_clean), b, "head") if chain else None
            dims["k"] = None if c is None else c.shape[1]
            clean = None
            for fam in fams:
                xi = _xi0_for(fam, xi0)
                x_aug = fam.apply(x, xi)
                at_identity = float((x_aug - x).abs().max()) <= IDENTITY_ULPS * torch.finfo(dtype).eps
                if at_identity:  # within rounding: share the clean image's base point
                    if clean is None:
                        clean = _base_point(pix_to_z, head_fn if chain else None, head_gram, x, e_pix, e_z, c, loss,
                                            batch_size)
                    base = clean
                else:
                    base = _base_point(pix_to_z, head_fn if chain else None, head_gram, x_aug, e_pix, e_z, c, loss,
                                       batch_size)
                u_pix, t_z = augmentation_tangent(lambda y: (y, pix_to_z(y)), x, fam, xi)
                h = _fd_step(fam, dtype)
                fd = (pix_to_z(fam.apply(x, xi + h)) - pix_to_z(fam.apply(x, xi - h))) / (2 * h)
                add(fam.name, "fd_err", _quotient((t_z - fd).norm(dim=1), fd.norm(dim=1)))
                u2, t2 = u_pix.flatten(1).pow(2).sum(1), t_z.pow(2).sum(1)
                add(fam.name, "backbone_t", _quotient(t2, u2))
                add(fam.name, "backbone_r", base["jb_e"].pow(2).sum(-1))
                # Chart θ = (ξ at unit pixel speed, r_1..r_m): J_z columns, eigenvalues of I_z(θ).
                speed = u2.sqrt().clamp_min(torch.finfo(dtype).tiny)
                jz = torch.cat([(t_z / speed[:, None]).unsqueeze(1), base["jb_e"]], 1)
                add(fam.name, "chart_lam_z", torch.linalg.svdvals(jz).square())
                if not chain:
                    continue
                jv_t = jvp(head_fn, (base["z"],), (t_z,))[1]  # (b, k)
                jv2 = jv_t.pow(2).sum(-1)
                add(fam.name, "head_G_t", _quotient(jv2, t2))
                add(fam.name, "head_G_r", base["jv_r"][:, :m].pow(2).sum(-1))
                add(fam.name, "end_to_end_t", _quotient(jv2, u2))
                add(fam.name, "end_to_end_r", base["jv_r"][:, m:].pow(2).sum(-1))
                add(fam.name, "head_loss_t", _quotient((jv_t * base["curv"].apply(jv_t)).sum(-1) * b, t2))
                add(fam.name, "head_loss_r", base["loss_r"])
                ju = torch.cat([(jv_t / speed[:, None]).unsqueeze(1), base["jv_r"][:, m:]], 1)
                add(fam.name, "chart_lam_h", torch.linalg.svdvals(ju).square())
                lam, vecs = base["eig"]
                add(fam.name, "head_lam", lam)
                v = torch.cat([t_z.unsqueeze(1), e_z], 1)
                for tol in tols:
                    add(fam.name, f"null_{tol:g}", _null_fractions(lam, vecs, v, tol))

    return assemble_result(acc, dict(
        families=[f.name for f in fams], units={f.name: f.units for f in fams},
        xi0={f.name: _xi0_for(f, xi0) for f in fams},
        fd_step={f.name: _fd_step(f, dtype) for f in fams},
        d=dims["d"], k=dims["k"], head=[n for n, _ in chain] or None, tols=tols,
        loss=loss, n_random=m, rel_tol=rel_tol, mean=mean, std=std, seed=seed, dtype=dtype,
        batch_size=batch_size, n_images=int(x_all.shape[0]), image_shape=list(x_all.shape[1:])))
