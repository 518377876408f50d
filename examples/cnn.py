"""A small, balanced CNN with no planted bottleneck (the overhead reference).

A conventional conv/batch-norm/ReLU/pool network trains on synthetic 3x32x32
images. Loading is cheap but real (an in-memory pool with a per-sample random
flip and crop in torch, DataLoader num_workers=0); compute is spread over
several layers, none of which dominates. Used as "the CNN example" of the
overhead target: a profiler should add little here.

Not planted, but present (Debian 12, glibc 2.36): with glibc malloc's default
dynamic mmap/trim thresholds, the activation buffers (1-2 MB each) go back to
the kernel and are faulted in again every step, so about 60 % of the loop is
page faults and sys time (~200 k minor faults per 100 steps). With
MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 the same loop
runs ~2.7x faster. Anything that frees a large malloc'd block early in the
process (a profiler's buffers, say) can flip this state, so a profiled run
may be faster than the plain one; loop_rusage in the ground truth shows which
state a run was in.

    /usr/bin/python3 examples/cnn.py [--steps N] [--seed S]
        [--ground-truth PATH] [--batch-size B]

--ground-truth PATH writes what the script measured about itself with
time.perf_counter (five clock reads per step, no profiler).
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

EXAMPLE = "cnn"
PLANTED = "none: balanced CNN (reference for overhead)"


# --- ground truth: measured by the script itself, without any profiler -----
def write_ground_truth(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# --- data and model -----------------------------------------------------------
class AugmentedPool(Dataset):
    """In-memory pool with a cheap torch augmentation (flip + 4-px crop)."""

    def __init__(self, length, seed, pool=512):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(pool, 3, 36, 36, generator=g)
        self.labels = torch.randint(0, 10, (pool,), generator=g)
        self.length = length
        self.seed = seed

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        k = idx % len(self.labels)
        r = (idx * 2654435761 + self.seed) & 0xFFFF
        dx, dy = r % 5, (r >> 4) % 5
        img = self.images[k, :, dy:dy + 32, dx:dx + 32]
        if r & 0x100:
            img = torch.flip(img, dims=(2,))
        return img, self.labels[k]


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 16), nn.MaxPool2d(2),
            conv_bn(16, 32), nn.MaxPool2d(2),
            conv_bn(32, 64), nn.MaxPool2d(2),
            conv_bn(64, 64), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--print-every", type=int, default=20)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    data = AugmentedPool(args.steps * args.batch_size, args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                          weight_decay=5e-4)
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

    gt = clock.summary(args)
    s = gt["shares"]
    ru = gt["loop_rusage"]
    print(f"{EXAMPLE}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, "
          f"data {100 * s['data_wait']:.0f} % / forward "
          f"{100 * s['forward']:.0f} % / backward {100 * s['backward']:.0f} % / "
          f"optimizer {100 * s['optimizer']:.0f} %; sys {ru['sys_s']:.2f} s, "
          f"{ru['minor_faults']} minor faults", flush=True)
    if args.ground_truth:
        write_ground_truth(args.ground_truth, gt)


if __name__ == "__main__":
    main()
