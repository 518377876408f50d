"""Planted bottleneck: the input pipeline sleeps.

A small CNN trains on synthetic 3x32x32 images served by a DataLoader with
num_workers=0 whose Dataset.__getitem__ sleeps (2 ms per sample by default, a
stand-in for disk or network reads). The main thread therefore spends most of
every step waiting in next(loader), while the model itself is cheap.

Expected verdict: data loading dominates the step (about 80 % here); more
DataLoader workers (e.g. --num-workers 2) remove most of the wait.

    /usr/bin/python3 examples/input_bound_sleep.py [--steps N] [--seed S]
        [--ground-truth PATH] [--num-workers W] [--sleep-ms MS]

--ground-truth PATH writes what the script measured about itself with
time.perf_counter (five clock reads per step, no profiler): loop wall, per-step
times, seconds waiting in next(loader), forward, backward, optimizer.
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
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

EXAMPLE = "input_bound_sleep"
PLANTED = "data_wait: Dataset.__getitem__ sleeps, DataLoader num_workers=0"


# --- ground truth: measured by the script itself, without any profiler -----
def write_ground_truth(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# --- data and model -----------------------------------------------------------
class SleepyImages(Dataset):
    """Synthetic images from a fixed pool; each read sleeps like slow I/O."""

    def __init__(self, length, sleep_s, seed, pool=256):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(pool, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (pool,), generator=g)
        self.length = length
        self.sleep_s = sleep_s

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        time.sleep(self.sleep_s)
        k = idx % len(self.labels)
        return self.images[k], self.labels[k]


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--sleep-ms", type=float, default=2.0)
    p.add_argument("--print-every", type=int, default=20)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    data = SleepyImages(args.steps * args.batch_size, args.sleep_ms / 1000.0,
                        args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

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

    gt = clock.summary(args, {"sleep_ms_per_sample": args.sleep_ms})
    print(f"{EXAMPLE}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, "
          f"data wait {100 * gt['shares']['data_wait']:.1f} % of step time",
          flush=True)
    if args.ground_truth:
        write_ground_truth(args.ground_truth, gt)


if __name__ == "__main__":
    main()
