"""Planted bottleneck: framework overhead from hundreds of tiny operators.

The model is a deep stack of Linear(8, 8) blocks, each followed by a short loop
of elementwise ops on 8x8 tensors (tanh, mul, add, relu). Every operator does a
few dozen flops, so each step is hundreds of operator dispatches of a few
microseconds each in forward, backward and the optimizer (a per-parameter SGD
loop over hundreds of small parameters): the time goes to Python, dispatch and
autograd bookkeeping, not arithmetic.

Expected verdict: framework/dispatch overhead (many ops, each a few us);
fixes are batching work into fewer, larger ops (wider layers, fused or
vectorised code, torch.jit/compile, foreach optimizers).

    /usr/bin/python3 examples/tiny_ops.py [--steps N] [--seed S]
        [--ground-truth PATH] [--blocks B] [--inner K]

--ground-truth PATH writes what the script measured about itself with
time.perf_counter (five clock reads per step, no profiler), plus the number of
operators per step it expects by construction.
"""
import time

_SCRIPT_T0 = time.perf_counter()

import argparse
import json
import os
import resource
import statistics
import sys

from ground_truth import StepClock  # examples/ground_truth.py
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

EXAMPLE = "tiny_ops"
PLANTED = ("framework overhead: hundreds of tiny ops (8-element tensors, "
           "Linear(8, 8) stacks) per step")


# --- ground truth: measured by the script itself, without any profiler -----
def write_ground_truth(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# --- data and model -----------------------------------------------------------
class PoolVectors(Dataset):
    def __init__(self, length, seed, width, pool=512):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(pool, width, generator=g)
        self.y = torch.randn(pool, width, generator=g)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        k = idx % len(self.x)
        return self.x[k], self.y[k]


class TinyBlock(nn.Module):
    def __init__(self, width, inner):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))
        self.inner = inner

    def forward(self, x):
        h = self.fc(x)
        for _ in range(self.inner):
            h = torch.tanh(h) * self.scale + 0.1
        return torch.relu(h) + x


class TinyOpsNet(nn.Module):
    def __init__(self, blocks, inner, width):
        super().__init__()
        self.blocks = nn.Sequential(*[TinyBlock(width, inner)
                                      for _ in range(blocks)])

    def forward(self, x):
        return self.blocks(x)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--blocks", type=int, default=48)
    p.add_argument("--inner", type=int, default=2,
                   help="tanh*scale+c repetitions per block")
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--print-every", type=int, default=100)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    data = PoolVectors(args.steps * args.batch_size, args.seed, args.width)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers)
    model = TinyOpsNet(args.blocks, args.inner, args.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, foreach=False)
    loss_fn = nn.MSELoss()

    clock = StepClock(EXAMPLE, PLANTED, _SCRIPT_T0)
    rows = clock.rows
    pc = time.perf_counter
    t_prev = clock.start()
    for step, (x, y) in enumerate(loader):
        t_data = pc()
        loss = loss_fn(model(x), y)
        t_fwd = pc()
        loss.backward()
        t_bwd = pc()
        opt.step()
        opt.zero_grad()
        t_opt = pc()
        if step % args.print_every == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}", flush=True)
        t_end = pc()
        rows.append((t_end - t_prev, t_data - t_prev, t_fwd - t_data,
                     t_bwd - t_fwd, t_opt - t_bwd))
        t_prev = t_end
    clock.stop()

    gt = clock.summary(args)
    # User-visible forward ops per block: linear, inner x (tanh, mul, add),
    # relu, add; plus the loss. Dispatcher-level ops are more (addmm, t, ...).
    fwd_ops = args.blocks * (1 + 3 * args.inner + 2) + 1
    n_params = len(list(model.parameters()))
    tot = gt["totals_s"]
    gt["ops"] = {
        "forward_user_ops_per_step": fwd_ops,
        "parameters": n_params,
        "forward_us_per_user_op": 1e6 * tot["forward"] / max(1, gt["steps"])
                                  / fwd_ops,
        "note": "forward ops counted by construction at the torch.* / "
                "nn.functional level; the dispatcher sees more (addmm, t, "
                "expand...), backward about as many again, and the optimizer "
                "runs one small update per parameter",
    }
    gt["model"] = {"blocks": args.blocks, "inner": args.inner,
                   "width": args.width}
    print(f"{EXAMPLE}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, "
          f"{fwd_ops} forward ops/step, "
          f"{gt['ops']['forward_us_per_user_op']:.1f} us per forward op",
          flush=True)
    if args.ground_truth:
        write_ground_truth(args.ground_truth, gt)


if __name__ == "__main__":
    main()
