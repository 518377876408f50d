"""A small, deterministic training workload for the operator-collector tests.

Runs the same sequence of operators on every run (fixed seed, fixed data, no
shuffling, single-process DataLoader): a conv net's forward, backward and SGD
step, a record_function() block per step, and a few ops that take tensor
lists and scalars. Usage: ops_workload.py [--steps N]
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


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
    batch = 8
    inputs = torch.randn(args.steps * batch, 3, 16, 16)
    labels = torch.randint(0, 10, (args.steps * batch,))
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=batch,
                        shuffle=False, num_workers=0)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    total = 0.0
    for x, y in loader:
        with torch.autograd.profiler.record_function("train_step"):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        # Ops with tensor-list and scalar inputs, for the shape signatures.
        extra = torch.cat([x[:2], x[2:4]]).mul(0.5).sum()
        total += float(loss.detach()) + float(extra) * 0.0
    print(f"steps={len(loader)} loss_sum={total:.4f}")


if __name__ == "__main__":
    main()
