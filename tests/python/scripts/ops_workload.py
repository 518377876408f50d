"""A small, deterministic training workload for the operator-collector tests.

Runs the same sequence of operators on every run: fixed seed, fixed data, no
shuffling, a single-process DataLoader, CPU only. Each step is a conv net's
forward, backward and SGD step inside a record_function() block, plus a few
ops that take tensor lists and scalars (for the shape signatures). The data
set is small and re-iterated, so no one-off operator (e.g. a big randn)
outweighs the per-step ones: the top operator by self time runs every step.

Usage: ops_workload.py [--steps N]
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

BATCH = 8
BATCHES_PER_EPOCH = 8


def build_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = BATCH * BATCHES_PER_EPOCH
    data = TensorDataset(torch.randn(n, 3, 16, 16), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=0)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    steps = 0
    total = 0.0
    while steps < args.steps:
        for x, y in loader:
            with torch.autograd.profiler.record_function("train_step"):
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            extra = torch.cat([x[:2], x[2:4]]).mul(0.5).sum()
            total += float(loss.detach()) + 0.0 * float(extra)
            steps += 1
            if steps == args.steps:
                break
    print(f"steps={steps} loss_sum={total:.4f}")


if __name__ == "__main__":
    main()
