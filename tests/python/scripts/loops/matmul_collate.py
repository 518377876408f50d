"""Loop shape: compute made of large matrix products, data made of many tiny
operators.

The model is 3 Linear(512, 512) layers on batches of 128: each step's
compute is a few large aten::mm / addmm calls (milliseconds each). The loader's
collate_fn converts and normalises every sample on its own (a training
library's per-sample `.to()`): hundreds of operators of a few microseconds
per batch, inside next(loader), in a small share of the step. The
compute is not made of tiny operators: torchneck must not report
framework_overhead ("many tiny operators per step") for it.

    /usr/bin/python3 matmul_collate.py [--steps N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus
  collate_ops_per_batch  the operators collate_fn calls per batch, by construction
per_step_s: step, data_wait, forward, backward, optimizer.
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from looptruth import LoopClock, mlp, plain_loop, print_shares

OPS_PER_SAMPLE = 4  # to(float32), sub, mul, to(float32) of the target


def per_sample_collate(samples):
    xs, ys = [], []
    for x, y in samples:
        xs.append((x.to(torch.float32) - 0.5) * 2.0)
        ys.append(y.to(torch.float32))
    return torch.stack(xs), torch.stack(ys)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    n = a.steps * a.batch
    data = TensorDataset(torch.rand(n, a.width, dtype=torch.float64), torch.randn(n, a.width, dtype=torch.float64))
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=0, collate_fn=per_sample_collate)
    model = mlp(a.width, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()

    clock = LoopClock("matmul_collate", "large matmuls; per-sample to() in collate_fn")
    plain_loop(clock, loader, model, loss_fn, opt, a.steps)
    gt = clock.write(a.truth, {"collate_ops_per_batch": OPS_PER_SAMPLE * a.batch + 2})
    print_shares(gt, _T0)


if __name__ == "__main__":
    main()
