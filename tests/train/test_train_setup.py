"""headgeom.train.setup: what a run steps is built as its readers rebuild it (method, normalisation),
with the schedule's lengths from the data, and a batch that cannot be split fails before training."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from headgeom.data import load_dataset
from headgeom.train import TrainConfig, build_method_from_config
from headgeom.train.setup import channels_last_pays, set_up

CONFIG = TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.0625}, head="d-16-8",
                     predictor="8-4-8", data="shapes", data_options={"n": 16, "size": 16}, batch_size=8,
                     epochs=3, max_steps=5, warmup_epochs=0.5, seed=3, device="cpu", progress=False)


def test_the_views_are_normalised_as_the_run_is_read_back():
    s = set_up(CONFIG, build_method_from_config, with_probe=False)
    mean, std = CONFIG.run_settings().normalisation()
    x = load_dataset("shapes", "train", None, **CONFIG.data_options).images.double().div(255)
    torch.testing.assert_close(torch.tensor(s.recipe.mean, dtype=torch.float64), x.mean(dim=(0, 2, 3)),
                               atol=1e-9, rtol=0)
    assert (s.recipe.mean, s.recipe.std) == (mean, std)
    off = set_up(dataclasses.replace(CONFIG, normalize=False), build_method_from_config, with_probe=False)
    assert off.recipe.mean is None and off.recipe.std is None


def test_parameters_are_drawn_from_the_runs_seed_and_the_lengths_from_the_data():
    s = set_up(CONFIG, build_method_from_config, with_probe=True)
    torch.manual_seed(CONFIG.seed)
    ref = CONFIG.run_settings().build_method().state_dict()
    got = s.method.state_dict()
    assert set(got) == set(ref) and all(torch.equal(got[k], ref[k]) for k in ref)
    # 16 images in batches of 8: 2 steps an epoch, 3 epochs, capped at 5, half an epoch (1 step) of warm-up
    assert (s.n, s.steps_per_epoch, s.total, s.stop, s.warmup) == (16, 2, 6, 5, 1)
    assert len(s.probe) == 2 and s.probe[0].shape[0] == 16  # probe_size 256 capped by the 16 images


def test_a_batch_larger_than_the_data_says_what_to_use():
    with pytest.raises(ValueError, match=r"batch_size=32 exceeds the 16 training images of 'shapes'; use --batch-size <= 16"):
        set_up(dataclasses.replace(CONFIG, batch_size=32), build_method_from_config, with_probe=False)


def test_cpu_training_stays_contiguous_and_the_layout_is_the_same_computation():
    """CPU runs are contiguous (oneDNN's channels-last backward crashed on an AVX2 CPU at this very
    width: setup.channels_last_pays); the layout reorders the arithmetic only: a ResNet's loss and every
    gradient agree between the two layouts to float64 round-off (1e-12 relative), so CUDA's channels_last
    changes no result beyond round-off. Float64 convolutions take oneDNN's reference kernels, not the jit
    kernel that crashed."""
    assert channels_last_pays(torch.device("cuda")) and not channels_last_pays(torch.device("cpu"))
    s = set_up(CONFIG, build_method_from_config, with_probe=False)
    assert s.memory_format == torch.contiguous_format
    assert next(p for p in s.method.parameters() if p.dim() == 4).is_contiguous()
    assert set_up(dataclasses.replace(CONFIG, channels_last=False), build_method_from_config,
                  with_probe=False).memory_format == torch.contiguous_format
    torch.manual_seed(0)
    method = build_method_from_config(dataclasses.replace(CONFIG, predictor=None, method="simclr")).double()
    views = [torch.rand(8, 3, 16, 16, dtype=torch.float64) for _ in range(2)]
    grads = []
    for layout in (torch.contiguous_format, torch.channels_last):
        method = method.to(memory_format=layout)
        method.zero_grad(set_to_none=True)
        loss = method([v.contiguous(memory_format=layout) for v in views])["loss"]
        loss.backward()
        grads.append((loss.detach(), torch.cat([p.grad.flatten() for p in method.parameters()])))
    (l0, g0), (l1, g1) = grads
    torch.testing.assert_close(l1, l0, rtol=1e-12, atol=0)
    assert float((g1 - g0).norm() / g0.norm()) < 1e-12
