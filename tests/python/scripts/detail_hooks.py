"""A loop of tiny layers that records, before each step's forward, how many
global nn.Module forward pre-hooks are registered (torch's own dict: the
ground truth of whether module calls take _call_impl's slow path). Each
step also opens one user scope through Python's record_function class
(detail_hooks.step) and, inside it, one through torch's profiler op
directly (detail_hooks.native: a RecordFunction made in C++, as C++ code and
TorchScript make theirs, not through the class).

    python detail_hooks.py OUT.json STEPS
"""
import json
import sys

import torch
from torch import nn
from torch.autograd.profiler import record_function
from torch.nn.modules import module as torch_module


def native_scope():
    """torch.ops.profiler's enter and exit (the ops record_function wraps:
    torch 1.13 has the tensor-handle pair only, torch 2.x both)."""
    ops = torch.ops.profiler
    if hasattr(ops, "_record_function_enter_new"):
        return (lambda: ops._record_function_enter_new("detail_hooks.native", None),
                lambda h: ops._record_function_exit._RecordFunction(h))
    return (lambda: ops._record_function_enter("detail_hooks.native", None), ops._record_function_exit)


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(24)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hooks = []
    enter, exit_ = native_scope()
    for _ in range(steps):
        hooks.append(len(torch_module._global_forward_pre_hooks))
        with record_function("detail_hooks.step"):
            handle = enter()
            x = torch.randn(4, 8)
            exit_(handle)
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    with open(out, "w") as f:
        json.dump(hooks, f)


if __name__ == "__main__":
    main()
