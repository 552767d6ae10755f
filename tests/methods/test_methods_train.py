"""Every method learns: a few optimiser steps on one FIXED batch of ``shapes`` (views
augmented once with the method's own recipe, 16 px, resnet18 at width 1/16, heads of width
32) lower the loss: the mean of the last 3 steps is below the mean of the first 3 by a
stated margin. Everything is seeded and runs on one thread, so the test is deterministic.

DINO runs with centre momentum 0.99 instead of 0.9: on one repeated batch the centre catches
up with the teacher within a few steps and the teacher's entropy, a floor of the
cross-entropy, rises towards log K; with fresh batches (real training) this does not happen.
"""
import math

import pytest
import torch

from headgeom.data import load_shapes
from headgeom.methods import METHODS, build_method

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

STEPS = 12
HEADS = {
    "dino": ("d-32-32:gelu:dino=16", None),
    "simsiam": ("d-32-32:bn:last=bn", "d-16-32:bn"),
    "byol": ("d-32-32:bn", "d-16-32:bn"),
    "mocov3": ("d-32-32:bn:last=bn_noaffine", "d-16-32:bn"),
}
OPTIONS = {"dino": {"center_momentum": 0.99, "teacher_temp": 0.04}}


def train_losses(name: str) -> list[float]:
    torch.manual_seed(0)
    head, pred = HEADS.get(name, ("d-32-32:bn:last=bn", None))
    m = build_method(name, "resnet18", head=head, predictor=pred,
                     backbone_options={"width": 0.0625}, **OPTIONS.get(name, {}))
    x = load_shapes("train", n=16, size=16).images.float() / 255
    rk = {"local_size": 8, "n_local": 2} if name == "dino" else {}
    views = m.recipe(16, **rk)(x, torch.Generator().manual_seed(1))
    opt = torch.optim.Adam(m.param_groups(0.0), lr=3e-3)
    losses = []
    for step in range(STEPS):
        out = m(views)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        m.on_step_end(step, STEPS)
        losses.append(float(out["loss"].detach()))
    return losses


@pytest.mark.parametrize("name", sorted(METHODS))
def test_loss_decreases_on_a_fixed_batch(name):
    losses = train_losses(name)
    assert all(math.isfinite(v) for v in losses), losses
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    # at least 10% of the first loss's magnitude (SimSiam starts near 0, so at least 0.1 there)
    margin = max(0.1 * abs(first), 0.1)
    assert last < first - margin, f"{name}: first {losses[:3]}, last {losses[-3:]}"
