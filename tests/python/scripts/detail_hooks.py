"""A loop of tiny layers that records, before each step's forward, how many
global nn.Module forward pre-hooks are registered (torch's own dict: the
ground truth of whether module calls take _call_impl's slow path).

    python detail_hooks.py OUT.json STEPS
"""
import json
import sys

import torch
from torch import nn
from torch.nn.modules import module as torch_module


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(24)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hooks = []
    for _ in range(steps):
        hooks.append(len(torch_module._global_forward_pre_hooks))
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
    with open(out, "w") as f:
        json.dump(hooks, f)


if __name__ == "__main__":
    main()
