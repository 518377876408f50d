"""Planted bottleneck: call-heavy pure-Python preprocessing.

Each sample is built and augmented pixel by pixel in plain Python (lists,
floats and many tiny helper functions: a random generator, normalise, jitter,
clamp, gamma), then turned into a tensor. The DataLoader uses num_workers=0, so
the main thread spends most of every step in Dataset.__getitem__ (inside
next(loader)), executing millions of small Python calls per second, while a
small CNN trains on the result.

This is the example that decides the profiler's default Python mode: a
deterministic tracer pays per call and inflates exactly this code, so it
distorts the data-wait share; a sampler should not.

Expected verdict: data loading is the majority of the step (about 60-75 % of
step time here; kept well below 100 % on purpose, so that a profiler that
inflates the Python code shows up as a clear rise of the share); the fix is
vectorised preprocessing (torch/numpy ops on whole images) and/or
DataLoader workers (--num-workers 2).

    /usr/bin/python3 examples/input_bound_python.py [--steps N] [--seed S]
        [--ground-truth PATH] [--num-workers W] [--side PX]

--ground-truth PATH writes what the script measured about itself with
time.perf_counter (five clock reads per step, no profiler), plus the number of
Python function calls per sample (counted by construction, see calls_per_sample).
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

EXAMPLE = "input_bound_python"
PLANTED = ("data_wait: per-pixel pure-Python preprocessing in "
           "Dataset.__getitem__, DataLoader num_workers=0")


# --- ground truth: measured by the script itself, without any profiler -----
def write_ground_truth(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# --- data: pure-Python, call-heavy preprocessing -----------------------------
MEAN = (0.49, 0.48, 0.45)
STD = (0.25, 0.24, 0.26)


def lcg(state):
    return (state * 1103515245 + 12345) & 0x7FFFFFFF


def unit(state):
    return (state >> 8 & 0xFFFF) / 65535.0


def gamma(p, g):
    return p ** g if p > 0.0 else 0.0


def jitter(p, amount, r):
    return p + amount * (r - 0.5)


def clamp(p, lo=0.0, hi=1.0):
    return lo if p < lo else (hi if p > hi else p)


def normalise(p, mean, std):
    return (p - mean) / std


def make_pixel(state, c, g):
    """One pixel: 7 calls (lcg x2, unit x2, gamma, jitter, clamp) + normalise."""
    state = lcg(state)
    p = gamma(unit(state), g)
    state = lcg(state)
    p = clamp(jitter(p, 0.1, unit(state)))
    return state, normalise(p, MEAN[c], STD[c])


def flip_row(row):
    return row[::-1]


def make_image(idx, seed, side):
    """3 x side x side nested lists; every pixel goes through make_pixel."""
    state = (seed * 1000003 + idx * 7919 + 1) & 0x7FFFFFFF
    g = 0.8 + 0.4 * unit(lcg(state))
    flip = idx % 2 == 1
    image = []
    for c in range(3):
        rows = []
        for _ in range(side):
            row = []
            for _ in range(side):
                state, v = make_pixel(state, c, g)
                row.append(v)
            rows.append(flip_row(row) if flip else row)
        image.append(rows)
    return image, state % 10


def calls_per_sample(side):
    """Python-level calls per __getitem__, by construction of the code above.

    Per pixel: make_pixel + lcg x2 + unit x2 + gamma + jitter + clamp +
    normalise = 9. Per image: make_image, lcg, unit, and one flip_row per row
    for odd indices (counted as half). row.append (a C method) is not counted.
    """
    return 9 * 3 * side * side + 3 + 0.5 * 3 * side + 1  # +1: __getitem__


class PythonAugmentedImages(Dataset):
    def __init__(self, length, seed, side):
        self.length, self.seed, self.side = length, seed, side

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        image, label = make_image(idx, self.seed, self.side)
        return torch.tensor(image), label


class SmallCNN(nn.Module):
    def __init__(self, side, width, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = nn.Linear(2 * width * (side // 2) ** 2, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--side", type=int, default=16, help="image side, pixels")
    p.add_argument("--width", type=int, default=8, help="conv channels")
    p.add_argument("--print-every", type=int, default=50)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    data = PythonAugmentedImages(args.steps * args.batch_size, args.seed,
                                 args.side)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers)
    model = SmallCNN(args.side, args.width)
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

    per_sample = calls_per_sample(args.side)
    samples = len(rows) * args.batch_size
    gt = clock.summary(args)
    wait = gt["totals_s"]["data_wait"]
    rate = per_sample * samples / wait if wait and not args.num_workers else None
    gt["python_calls"] = {
        "per_sample": per_sample,
        "total_in_getitem": per_sample * samples,
        "per_second_of_data_wait": rate,  # main thread only: num_workers=0
        "note": "counted by construction (calls_per_sample), not measured",
    }
    gt["image_side"] = args.side
    gt["conv_width"] = args.width
    calls = f", {rate / 1e6:.2f} M Python calls/s while loading" if rate else ""
    print(f"{EXAMPLE}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, "
          f"data wait {100 * gt['shares']['data_wait']:.1f} % of step time"
          f"{calls}", flush=True)
    if args.ground_truth:
        write_ground_truth(args.ground_truth, gt)


if __name__ == "__main__":
    main()
