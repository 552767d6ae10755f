"""headgeom.augment.functional against formulas written here, torch/scipy/colorsys references."""

from __future__ import annotations

import colorsys
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import ndimage

from headgeom.augment import functional as AF

LUMA = (0.299, 0.587, 0.114)  # ITU-R BT.601, written here independently of the code


def rand_images(n=3, c=3, h=8, w=8, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, c, h, w, generator=g, dtype=dtype)


def luma(x):
    return LUMA[0] * x[:, 0:1] + LUMA[1] * x[:, 1:2] + LUMA[2] * x[:, 2:3]


# ----------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_matches_torch(padding_mode):
    g = torch.Generator().manual_seed(1)
    x = torch.rand(3, 2, 7, 9, generator=g, dtype=torch.float64)
    grid = torch.rand(3, 5, 6, 2, generator=g, dtype=torch.float64) * 3.2 - 1.6  # in and out of range
    ref = F.grid_sample(x, grid, mode="bilinear", padding_mode=padding_mode, align_corners=False)
    torch.testing.assert_close(AF.grid_sample(x, grid, padding_mode), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_the_training_fast_path_samples_what_the_differentiable_one_does(padding_mode):
    """differentiable=False (F.grid_sample, for training views) against the forward-AD-safe sampler, on
    affine grids with whole-pixel shifts and 90° turns (every sample on a pixel centre, where the
    differentiable one averages two cells), crops and random affines: float64 to 1e-12 (one formula);
    float32 to the round-off of the pixel coordinate (|ix| <= max(H, W) carries an error of a few
    eps * max(H, W), times the largest step between neighbouring pixels, <= 1 for [0, 1] images)."""
    g = torch.Generator().manual_seed(3)
    n, h, w = 12, 24, 20
    eye = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    shift = eye.clone()
    shift[:, 2] = torch.tensor([2 / w, -4 / h])  # whole pixels
    turn = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])
    thetas = torch.stack([eye, shift, turn] + [eye + 0.4 * torch.randn(2, 3, generator=g) for _ in range(n - 3)])
    for dtype, atol in ((torch.float64, 1e-12), (torch.float32, 8 * torch.finfo(torch.float32).eps * max(h, w))):
        x = torch.rand(n, 3, h, w, generator=g, dtype=dtype)
        grid = F.affine_grid(thetas.to(dtype), [n, 3, h, w], align_corners=False)
        torch.testing.assert_close(AF.grid_sample(x, grid, padding_mode, differentiable=False),
                                   AF.grid_sample(x, grid, padding_mode), rtol=0, atol=atol)
        boxes = torch.tensor([[0.0, 0.0, h, w], [3.0, 2.0, 10.0, 7.0], [1.0, 5.0, 23.0, 15.0]] * (n // 3), dtype=dtype)
        torch.testing.assert_close(AF.resized_crop(x, boxes, 16, padding_mode, differentiable=False),
                                   AF.resized_crop(x, boxes, 16, padding_mode), rtol=0, atol=atol)
        angles = torch.rand(n, generator=g, dtype=dtype) * 90 - 45
        torch.testing.assert_close(AF.rotate(x, angles, padding_mode, differentiable=False),
                                   AF.rotate(x, angles, padding_mode), rtol=0, atol=atol)


def test_grid_sample_gradients_forward_and_reverse():
    g = torch.Generator().manual_seed(2)
    x = torch.rand(1, 1, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    grid = (torch.rand(1, 2, 2, 2, generator=g, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: AF.grid_sample(a, b, "zeros"), (x, grid),
                                    check_forward_ad=True, fast_mode=True)


def test_identity_parameters_give_identity():
    x = rand_images(h=9, w=7)
    for y in (AF.rotate(x, 0.0), AF.translate(x, 0.0, 0.0), AF.scale(x, 1.0), AF.affine(x),
              AF.adjust_hue(x, 0.0), AF.adjust_saturation(x, 1.0), AF.adjust_brightness(x, 1.0),
              AF.adjust_contrast(x, 1.0), AF.gaussian_blur(x, 0.0, 5), AF.solarize(x, 1.5)):
        torch.testing.assert_close(y, x, rtol=0, atol=1e-6)


def test_rotate_90_equals_rot90_counter_clockwise():
    x = rand_images(h=8, w=8)
    torch.testing.assert_close(AF.rotate(x, 90.0), torch.rot90(x, 1, dims=(-2, -1)), rtol=0, atol=1e-6)
    torch.testing.assert_close(AF.rotate(x, -90.0), torch.rot90(x, -1, dims=(-2, -1)), rtol=0, atol=1e-6)
    torch.testing.assert_close(AF.rotate(x, 180.0), x.flip(-1).flip(-2), rtol=0, atol=1e-6)


def test_rotate_90_non_square_keeps_aspect():
    # 6x6 content centred in a 6x10 canvas: the rotated content is rot90 of it, in place.
    content = rand_images(n=2, h=6, w=6)
    x = torch.zeros(2, 3, 6, 10)
    x[..., 2:8] = content
    expected = torch.zeros_like(x)
    expected[..., 2:8] = torch.rot90(content, 1, dims=(-2, -1))
    torch.testing.assert_close(AF.rotate(x, 90.0), expected, rtol=0, atol=1e-6)


def test_affine_on_linear_image_matches_formula():
    """Bilinear interpolation reproduces linear images exactly: compare with the map itself."""
    h, w = 9, 12
    rows, cols = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64),
                                indexing="ij")
    a, b, c0 = 0.05, -0.03, 0.5
    x = (a * cols + b * rows + c0).expand(3, 3, h, w).contiguous()
    angle = torch.tensor([17.0, -60.0, 125.0], dtype=torch.float64)
    s = torch.tensor([1.0, 1.3, 0.8], dtype=torch.float64)
    dx = torch.tensor([0.1, -0.05, 0.0], dtype=torch.float64)
    dy = torch.tensor([0.0, 0.08, -0.1], dtype=torch.float64)
    out = AF.affine(x, angle, dx, dy, s)
    cc, cr = (w - 1) / 2, (h - 1) / 2
    for i in range(3):  # reference: input point = R(θ)^-1 (p - centre - t) / s + centre, y down
        th = math.radians(angle[i].item())
        qc, qr = cols - cc - dx[i] * w, rows - cr - dy[i] * h
        src_c = (math.cos(th) * qc - math.sin(th) * qr) / s[i] + cc
        src_r = (math.sin(th) * qc + math.cos(th) * qr) / s[i] + cr
        inside = (src_c >= 0) & (src_c <= w - 1) & (src_r >= 0) & (src_r <= h - 1)
        assert inside.sum() > 20
        ref = a * src_c + b * src_r + c0
        torch.testing.assert_close(out[i, 0][inside], ref[inside], rtol=0, atol=1e-12)


def test_translate_whole_pixel_shift_direction():
    x = rand_images(h=6, w=8)
    right = AF.translate(x, 1 / 8, 0.0)
    torch.testing.assert_close(right[..., 1:], x[..., :-1], rtol=0, atol=1e-6)
    torch.testing.assert_close(right[..., 0], torch.zeros_like(x[..., 0]), rtol=0, atol=1e-6)
    down = AF.translate(x, 0.0, 2 / 6)
    torch.testing.assert_close(down[..., 2:, :], x[..., :-2, :], rtol=0, atol=1e-6)


def test_hflip():
    x = rand_images()
    torch.testing.assert_close(AF.hflip(AF.hflip(x)), x, rtol=0, atol=0)
    torch.testing.assert_close(AF.hflip(x), x[..., torch.arange(7, -1, -1)], rtol=0, atol=0)


def test_resized_crop_exact_crop_and_downsample():
    x = rand_images(n=2, h=10, w=12, dtype=torch.float64)
    boxes = torch.tensor([[1.0, 2.0, 6.0, 4.0], [3.0, 0.0, 6.0, 4.0]])
    out = AF.resized_crop(x, boxes, (6, 4))
    torch.testing.assert_close(out[0], x[0, :, 1:7, 2:6], rtol=0, atol=1e-12)
    torch.testing.assert_close(out[1], x[1, :, 3:9, 0:4], rtol=0, atol=1e-12)
    # Bilinear 2x downsampling samples midway between pixel pairs: a 2x2 average pool.
    full = torch.tensor([[0.0, 0.0, 10.0, 12.0]]).expand(2, 4)
    torch.testing.assert_close(AF.resized_crop(x, full, (5, 6)), F.avg_pool2d(x, 2), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        AF.resized_crop(x, boxes[:1], 4)


# ----------------------------------------------------------------------------- colour


def test_grayscale_is_itu_601_luma():
    x = rand_images()
    torch.testing.assert_close(AF.to_grayscale(x), luma(x), rtol=0, atol=1e-6)
    three = AF.to_grayscale(x, num_output_channels=3)
    assert three.shape == x.shape
    torch.testing.assert_close(three, luma(x).expand_as(x), rtol=0, atol=1e-6)


def test_brightness_contrast_saturation_formulas():
    x = rand_images(dtype=torch.float64)
    f = torch.tensor([0.3, 1.0, 1.7], dtype=torch.float64).view(3, 1, 1, 1)
    fv = f.view(3)
    torch.testing.assert_close(AF.adjust_brightness(x, fv), (f * x).clamp(0, 1))
    mean = luma(x).mean(dim=(1, 2, 3), keepdim=True)  # mean of the grayscale image (torchvision)
    torch.testing.assert_close(AF.adjust_contrast(x, fv), (f * x + (1 - f) * mean).clamp(0, 1))
    torch.testing.assert_close(AF.adjust_saturation(x, fv), (f * x + (1 - f) * luma(x)).clamp(0, 1))
    torch.testing.assert_close(AF.adjust_saturation(x, 0.0), luma(x).expand_as(x))


def test_hue_matches_colorsys_and_full_turn():
    x = rand_images(n=3, h=4, w=5, dtype=torch.float64)
    shifts = [0.13, -0.37, 0.5]
    out = AF.adjust_hue(x, torch.tensor(shifts, dtype=torch.float64))
    ref = torch.empty_like(x)
    for i, sh in enumerate(shifts):
        for r in range(4):
            for c in range(5):
                hh, ss, vv = colorsys.rgb_to_hsv(*x[i, :, r, c].tolist())
                rgb = colorsys.hsv_to_rgb((hh + sh) % 1.0, ss, vv)
                ref[i, :, r, c] = torch.tensor(rgb, dtype=torch.float64)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    x32 = rand_images()
    torch.testing.assert_close(AF.adjust_hue(x32, 1.0), x32, rtol=0, atol=1e-6)
    torch.testing.assert_close(AF.adjust_hue(x32, -1.0), x32, rtol=0, atol=1e-6)
    gray = luma(x32).expand_as(x32)
    torch.testing.assert_close(AF.adjust_hue(gray, 0.3), gray, rtol=0, atol=1e-6)


def test_the_training_fast_hue_is_the_same_values_bit_for_bit():
    """differentiable=False writes the ramp as clamp(min(k, 4 - k), 0, 1): every subtraction of the
    symmetric form is exact for k in [0, 6), so the float32 values are equal, channel ties (uint8 images)
    and shifts landing on the kinks included."""
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, 256, (64, 3, 16, 16), generator=g).float() / 255
    x[:16, 1] = x[:16, 0]  # R = G
    x[16:24] = x[16:24, :1].expand(-1, 3, -1, -1)  # gray
    shifts = torch.cat([torch.rand(56, generator=g) - 0.5, torch.tensor([0.0, 1 / 6, -1 / 6, 0.5, -0.5, 1 / 3, 0.25, 1.0])])
    for dtype in (torch.float32, torch.float64):
        xx, sh = x.to(dtype), shifts.to(dtype)
        assert torch.equal(AF.adjust_hue(xx, sh, differentiable=False), AF.adjust_hue(xx, sh))


def test_hue_gradients():
    x = rand_images(n=2, h=3, w=3, dtype=torch.float64).requires_grad_()
    sh = torch.tensor([0.21, -0.33], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(AF.adjust_hue, (x, sh), check_forward_ad=True, fast_mode=True)


def test_hue_tangent_at_channel_ties_is_the_central_difference():
    # uint8 images tie channels often; there the hue map has a kink in the shift and the jvp must
    # give the symmetric derivative (the limit of a central difference), not the sum of both sides
    pixels = [(0.6, 0.6, 0.2), (0.2, 0.6, 0.6), (0.6, 0.2, 0.6), (0.8, 0.4, 0.4), (0.3, 0.7, 0.3),
              (0.5, 0.5, 0.5), (0.9, 0.1, 0.5)]
    x = torch.tensor(pixels, dtype=torch.float64).T.reshape(1, 3, 1, len(pixels))
    for shift in (0.0, 1 / 6, 0.25):
        s0 = torch.tensor([shift], dtype=torch.float64)
        _, tangent = torch.func.jvp(lambda t: AF.adjust_hue(x, t), (s0,), (torch.ones_like(s0),))
        h = 1e-6
        central = (AF.adjust_hue(x, s0 + h) - AF.adjust_hue(x, s0 - h)) / (2 * h)
        torch.testing.assert_close(tangent, central, rtol=0, atol=1e-6)
    # the value is unchanged: the closed form still equals colorsys at the tie pixels
    out = AF.adjust_hue(x, 0.1)
    for c, px in enumerate(pixels):
        hh, ss, vv = colorsys.rgb_to_hsv(*px)
        ref = torch.tensor(colorsys.hsv_to_rgb((hh + 0.1) % 1.0, ss, vv), dtype=torch.float64)
        torch.testing.assert_close(out[0, :, 0, c], ref, rtol=0, atol=1e-12)


def gaussian_taps(sigma, k):
    t = np.arange(k) - k // 2
    g = np.exp(-0.5 * (t / sigma) ** 2)
    return g / g.sum()


def test_gaussian_blur_of_delta_is_normalised_kernel():
    sigmas = [0.7, 1.5, 2.2]
    k = 9
    x = torch.zeros(3, 3, 21, 21, dtype=torch.float64)
    x[:, :, 10, 10] = 1.0
    out = AF.gaussian_blur(x, torch.tensor(sigmas, dtype=torch.float64), k)
    for i, s in enumerate(sigmas):
        g = gaussian_taps(s, k)
        expected = np.zeros((21, 21))
        expected[6:15, 6:15] = np.outer(g, g)
        for ch in range(3):
            np.testing.assert_allclose(out[i, ch].numpy(), expected, rtol=0, atol=1e-14)
        assert abs(out[i, 0].sum().item() - 1.0) < 1e-12


def test_gaussian_blur_reflect_padding_matches_scipy():
    x = rand_images(n=2, h=7, w=9, dtype=torch.float64)
    sigmas = [0.8, 1.9]
    out = AF.gaussian_blur(x, torch.tensor(sigmas, dtype=torch.float64), 7)
    for i, s in enumerate(sigmas):
        g = gaussian_taps(s, 7)
        for ch in range(3):
            ref = ndimage.correlate1d(x[i, ch].numpy(), g, axis=0, mode="mirror")
            ref = ndimage.correlate1d(ref, g, axis=1, mode="mirror")
            np.testing.assert_allclose(out[i, ch].numpy(), ref, rtol=0, atol=1e-13)


def test_gaussian_blur_differentiable_in_sigma():
    x = rand_images(n=2, h=6, w=6, dtype=torch.float64)
    sig = torch.tensor([0.6, 1.4], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: AF.gaussian_blur(x, s, 5), (sig,),
                                    check_forward_ad=True, fast_mode=True)


def test_solarize_and_normalize():
    x = rand_images(dtype=torch.float64)
    t = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64)
    tt = t.view(3, 1, 1, 1)
    torch.testing.assert_close(AF.solarize(x, t), torch.where(x >= tt, 1 - x, x))
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    ref = (x - torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1)) / torch.tensor(
        std, dtype=torch.float64).view(1, 3, 1, 1)
    torch.testing.assert_close(AF.normalize(x, mean, std), ref)


def test_errors_speak_to_the_user():
    x = rand_images()
    with pytest.raises(ValueError, match=r"shape \(N,\) = \(3,\)"):
        AF.rotate(x, torch.zeros(2))
    with pytest.raises(ValueError, match="N, C, H, W"):
        AF.rotate(x[0], 10.0)
    with pytest.raises(TypeError, match="float images"):
        AF.hflip((x * 255).to(torch.uint8))
    with pytest.raises(ValueError, match="3 RGB channels"):
        AF.adjust_hue(x[:, :1], 0.1)
    with pytest.raises(ValueError, match="odd"):
        AF.gaussian_blur(x, 1.0, 4)
    with pytest.raises(ValueError, match="too large"):
        AF.gaussian_blur(x, 1.0, 17)
    with pytest.raises(ValueError, match="padding_mode"):
        AF.rotate(x, 1.0, padding_mode="wrap")
    with pytest.raises(ValueError, match="3 values"):
        AF.normalize(x, (0.5, 0.5), (0.2, 0.2))
    with pytest.raises(ValueError, match="positive"):
        AF.normalize(x, (0.5,) * 3, (0.2, 0.0, 0.2))
