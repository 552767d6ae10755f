"""headgeom.methods.distributed on 2 gloo processes against dense float64 single-process references.

One spawn (module fixture) runs every scenario on 2 processes and saves what each process saw;
the tests compare with the same computation on the whole batch in this process:

- ``gather_rows``: the forward is the global batch in its order; the gradient of Σ_r w_r f(gather)
  reaching each process's rows is Σ_r w_r ∂f/∂x of one process (the sum over processes);
- ``all_reduce_sum`` and ``global_moments`` (unequal shards): values and gradients;
- ``GlobalBatchNorm`` (2-D and 4-D): outputs, input/weight gradients and running statistics equal
  torch's BatchNorm on the whole batch inside ``global_batch``, and BatchNorm on the shard outside;
- the methods (simclr, simclr_oneway, vicreg, barlow_twins, dino, mocov3, with a BatchNorm backbone
  converted by ``convert_sync_batchnorm``): the loss on every process and the DDP-averaged
  gradient equal one process on the whole batch; DINO's centre and MoCo v3's momentum encoder after
  ``on_step_end`` too (its BatchNorm running statistics). A
  control: without ``global_batch`` (per-shard losses) the coupled losses differ.
"""
from __future__ import annotations

import copy
import os
import socket
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from headgeom.methods import build_method
from headgeom.methods.distributed import (GlobalBatchNorm, all_reduce_sum, convert_sync_batchnorm,
                                          gather_rows, global_batch, global_moments, shard_rows)
from tiny_models import TinyBackbone

WORLD = 2
HEADS = {"simclr": "d-16-8", "simclr_oneway": "d-16-8:bn", "vicreg": "d-16-8:bn",
         "barlow_twins": "d-16-8", "dino": "d-16-16:gelu:dino=8", "mocov3": "d-16-8:bn:last=bn_noaffine"}
COUPLED = ("simclr", "simclr_oneway", "vicreg", "barlow_twins", "mocov3")



def gather_loss(y):
    """A loss that couples the rows: f(y) = Σ sin(y yᵀ) + Σ y³."""
    return (y @ y.T).sin().sum() + y.pow(3).sum()


def make_method(name):
    torch.manual_seed(0)
    return build_method(name, backbone=TinyBackbone(), head=HEADS[name]).double().train()


def method_views():
    g = torch.Generator().manual_seed(5)
    return [torch.rand(8, 3, 8, 8, generator=g, dtype=torch.float64) for _ in range(2)]


def bn_inputs(shape):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 2 + 1
    grad = torch.randn(*shape, generator=g, dtype=torch.float64)
    weight = torch.rand(shape[1], generator=g, dtype=torch.float64) + 0.5
    bias = torch.randn(shape[1], generator=g, dtype=torch.float64)
    return x, grad, weight, bias


def make_bn(shape, weight, bias):
    bn = (nn.BatchNorm1d if len(shape) == 2 else nn.BatchNorm2d)(shape[1], momentum=0.3).double()
    with torch.no_grad():
        bn.weight.copy_(weight)
        bn.bias.copy_(bias)
    return bn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=120))
    try:
        torch.save(_scenarios(rank), os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _scenarios(rank: int) -> dict:
    res: dict = {}
    w = float(rank + 1)  # a different weight per process: the backward must sum them
    # gather_rows
    x_full = torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = shard_rows(x_full, rank, WORLD).clone().requires_grad_(True)
    res["gather_identity_outside"] = gather_rows(x) is x
    with global_batch():
        y = gather_rows(x)
    res["gather_y"] = y.detach()
    (w * gather_loss(y)).backward()
    res["gather_grad"] = x.grad
    # all_reduce_sum
    a = torch.randn(4, 3, generator=torch.Generator().manual_seed(10 + rank), dtype=torch.float64)
    a.requires_grad_(True)
    with global_batch():
        s = all_reduce_sum(a)
    (w * s.pow(2).sum()).backward()
    res["reduce_a"], res["reduce_s"], res["reduce_grad"] = a.detach(), s.detach(), a.grad
    # global_moments on unequal shards (3 and 5 rows)
    m_full = torch.randn(8, 4, 3, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    m = (m_full[:3] if rank == 0 else m_full[3:]).clone().requires_grad_(True)
    with global_batch():
        mean, var, n = global_moments(m, (0, 2, 3))
    coef = torch.arange(1.0, 5.0, dtype=torch.float64)
    (w * (coef * mean + coef.flip(0) * var).sum()).backward()
    res["moments"] = (mean.detach(), var.detach(), float(n), m.grad)
    # GlobalBatchNorm, 2-D (a head's BatchNorm1d) and 4-D (a backbone's BatchNorm2d)
    for shape in ((8, 5), (8, 4, 3, 3)):
        xb, gb, weight, bias = bn_inputs(shape)
        model = convert_sync_batchnorm(nn.Sequential(make_bn(shape, weight, bias)))
        assert isinstance(model[0], GlobalBatchNorm)
        assert isinstance(model[0], nn.BatchNorm1d if len(shape) == 2 else nn.BatchNorm2d)
        local = copy.deepcopy(model)
        xr = shard_rows(xb, rank, WORLD).clone().requires_grad_(True)
        with global_batch():
            yr = model(xr)
        (yr * shard_rows(gb, rank, WORLD)).sum().backward()
        bn = model[0]
        y_local = local(shard_rows(xb, rank, WORLD))  # outside global_batch: this shard's statistics
        res[f"bn{len(shape)}"] = {"y": yr.detach(), "x_grad": xr.grad, "w_grad": bn.weight.grad,
                                  "b_grad": bn.bias.grad, "running_mean": bn.running_mean,
                                  "running_var": bn.running_var, "tracked": int(bn.num_batches_tracked),
                                  "y_local": y_local.detach()}
    # the methods
    views = method_views()
    for name in HEADS:
        method = convert_sync_batchnorm(make_method(name))
        shard = [shard_rows(v, rank, WORLD) for v in views]
        local_loss = float(copy.deepcopy(method)(shard)["loss"].detach())  # control: per-shard loss
        with global_batch():
            out = method(shard)
        out["loss"].backward()
        grads = {}
        for pname, p in method.named_parameters():
            if p.grad is not None:
                g = p.grad.clone()
                dist.all_reduce(g)
                grads[pname] = g / WORLD  # what DDP applies
        method.on_step_end(0, 10)
        res[name] = {"loss": float(out["loss"].detach()), "local_loss": local_loss, "grads": grads,
                     "buffers": {k: v.clone() for k, v in method.state_dict().items()
                                 if isinstance(v, torch.Tensor) and ("running" in k or "center" in k)}}
    return res


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def close(a, b, tol=1e-10):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def test_gather_rows_forward_and_gradient(ranks):
    x_full = torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = x_full.clone().requires_grad_(True)
    gather_loss(x).backward()
    total_weight = sum(r + 1.0 for r in range(WORLD))
    for rank, res in enumerate(ranks):
        assert res["gather_identity_outside"]  # no collective outside global_batch
        assert torch.equal(res["gather_y"], x_full)  # the global batch, in its order
        close(res["gather_grad"], total_weight * x.grad[rank::WORLD])


def test_all_reduce_sum_value_and_gradient(ranks):
    s = sum(res["reduce_a"] for res in ranks)
    total_weight = sum(r + 1.0 for r in range(WORLD))
    for res in ranks:
        close(res["reduce_s"], s)
        close(res["reduce_grad"], total_weight * 2 * s)


def test_global_moments_on_unequal_shards(ranks):
    m_full = torch.randn(8, 4, 3, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    m = m_full.clone().requires_grad_(True)
    mean, var = m.mean(dim=(0, 2, 3)), m.var(dim=(0, 2, 3), unbiased=False)
    coef = torch.arange(1.0, 5.0, dtype=torch.float64)
    (coef * mean + coef.flip(0) * var).sum().backward()
    grad = 3.0 * m.grad  # weights 1 + 2 over the processes
    for rank, res in enumerate(ranks):
        g_mean, g_var, n, g = res["moments"]
        close(g_mean, mean.detach())
        close(g_var, var.detach())
        assert n == 8 * 9
        close(g, grad[:3] if rank == 0 else grad[3:])


@pytest.mark.parametrize("shape", [(8, 5), (8, 4, 3, 3)])
def test_global_batchnorm_matches_batchnorm_on_the_whole_batch(ranks, shape):
    xb, gb, weight, bias = bn_inputs(shape)
    ref = make_bn(shape, weight, bias)
    x = xb.clone().requires_grad_(True)
    y = ref(x)
    (y * gb).sum().backward()
    key = f"bn{len(shape)}"
    for rank, res in enumerate(ranks):
        r = res[key]
        close(r["y"], y.detach()[rank::WORLD])
        close(r["x_grad"], x.grad[rank::WORLD])
        close(r["running_mean"], ref.running_mean)
        close(r["running_var"], ref.running_var)
        assert r["tracked"] == 1
        shard_ref = make_bn(shape, weight, bias)  # outside global_batch: plain BatchNorm of the shard
        close(r["y_local"], shard_ref(xb[rank::WORLD]).detach())
    # parameter gradients: DDP sums (then averages) the per-process ones
    close(sum(res[key]["w_grad"] for res in ranks), ref.weight.grad)
    close(sum(res[key]["b_grad"] for res in ranks), ref.bias.grad)


@pytest.mark.parametrize("name", list(HEADS))
def test_method_on_two_processes_matches_one(ranks, name):
    method = make_method(name)
    out = method(method_views())
    out["loss"].backward()
    method.on_step_end(0, 10)
    loss = float(out["loss"].detach())
    if name in COUPLED:  # the same global loss on every process
        for res in ranks:
            assert abs(res[name]["loss"] - loss) < 1e-10
        # control: the per-shard losses are not the global one
        assert abs(sum(res[name]["local_loss"] for res in ranks) / WORLD - loss) > 1e-3
    else:  # DINO's loss is a mean over samples: DDP's average of the shard losses
        assert abs(sum(res[name]["loss"] for res in ranks) / WORLD - loss) < 1e-10
    grads = {k: p.grad for k, p in method.named_parameters() if p.grad is not None}
    for res in ranks:
        assert set(res[name]["grads"]) == set(grads)
        for k, g in grads.items():
            close(res[name]["grads"][k], g, tol=1e-9)
        state = method.state_dict()
        assert res[name]["buffers"]  # BatchNorm running statistics (and DINO's centre)
        for k, v in res[name]["buffers"].items():
            close(v, state[k], tol=1e-9)


def test_convert_keeps_tensors_names_and_local_behaviour():
    """One process: the converted module holds the same tensors under the same names and computes
    exactly what torch's BatchNorm computes (train and eval); torch's SyncBatchNorm is refused."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Sequential(nn.BatchNorm2d(2)))
    ref = copy.deepcopy(model)
    tensors = {k: v for k, v in model.state_dict(keep_vars=True).items()}
    convert_sync_batchnorm(model)
    assert isinstance(model[1], GlobalBatchNorm) and isinstance(model[1], nn.BatchNorm1d)
    assert isinstance(model[2][0], GlobalBatchNorm) and isinstance(model[2][0], nn.BatchNorm2d)
    after = model.state_dict(keep_vars=True)
    assert list(after) == list(tensors) and all(after[k] is tensors[k] for k in tensors)
    x, img = torch.randn(6, 3), torch.randn(6, 2, 3, 3)
    for mode in (True, False):
        model.train(mode), ref.train(mode)
        with global_batch():  # no process group: still local
            assert torch.equal(model[:2](x), ref[:2](x))
            assert torch.equal(model[2](img), ref[2](img))
    for k, v in ref.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    with pytest.raises(TypeError, match="BatchNorm1d/2d/3d"):
        convert_sync_batchnorm(nn.SyncBatchNorm(4))
