"""A small MLP trained on the CPU, its model wrapped in torch.compile
(inductor, C++ kernels) unless --eager, timing itself with time.perf_counter:
per step the forward (the compiled model's call and the loss), the backward
and the optimizer; the first call's compilation; and what Dynamo counted
(frames, graphs, graph breaks), to check that the profiler neither breaks
nor recompiles the graph.

    python3 compiled_model.py [--steps N] [--eager | --in-place] [--truth PATH]
"""
import time

_SCRIPT_T0 = time.perf_counter()

import argparse
import json
import os

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(torch.relu(self.fc(x)) + x)


class Net(nn.Module):
    def __init__(self, width=128, depth=3, classes=10):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(x))


def dynamo_counts():
    """What Dynamo counted so far (torch._dynamo.utils.counters): frames it
    was asked to compile and compiled, graphs it made, graph breaks."""
    from torch._dynamo.utils import counters
    return {
        "frames_total": int(counters["frames"]["total"]),
        "frames_ok": int(counters["frames"]["ok"]),
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "graph_break_reasons": sorted(counters["graph_break"].keys()),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eager", action="store_true")
    p.add_argument("--in-place", action="store_true",
                   help="model.compile() (torch >= 2.2) instead of torch.compile(model)")
    p.add_argument("--truth", metavar="PATH")
    args = p.parse_args()

    torch.manual_seed(0)
    model = Net()
    run_model = model
    if args.in_place:
        model.compile()
    elif not args.eager:
        run_model = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, 128)
    y = torch.randint(0, 10, (args.batch_size,))
    loss_fn = nn.CrossEntropyLoss()

    pc = time.perf_counter
    rows = []  # (step, forward, backward, optimizer, model forward, model backward)
    out_grad_at = [0.0]

    def output_grad_arrives(grad):
        out_grad_at[0] = pc()

    for step in range(args.steps):
        t0 = pc()
        out = run_model(x)
        t_model = pc()
        out.register_hook(output_grad_arrives)
        loss = loss_fn(out, y)
        t1 = pc()
        loss.backward()
        t2 = pc()
        opt.step()
        opt.zero_grad()
        t3 = pc()
        # The model's backward: from its output's gradient to the end of
        # loss.backward() (the compiled backward graph, then the parameters'
        # gradient accumulation).
        rows.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2, t_model - t0, t2 - out_grad_at[0]))
    print(f"loss {loss.item():.4f}", flush=True)

    if args.truth:
        truth = {
            "compiled": not args.eager,
            "in_place": args.in_place,
            "steps": len(rows),
            "per_step_s": {k: [r[i] for r in rows]
                           for i, k in enumerate(("step", "forward", "backward", "optimizer",
                                                  "model_forward", "model_backward"))},
            "model": {"type": type(model).__name__,
                      "params": sum(p.numel() for p in model.parameters()),
                      "submodules": [n for n, _ in model.named_modules() if n]},
            # The first step compiles forward (at the call) and backward (at
            # loss.backward()); later steps only run the compiled code.
            "first_step_s": rows[0][0],
            "dynamo": None if args.eager and not args.in_place else dynamo_counts(),
            "torch": torch.__version__,
        }
        tmp = args.truth + ".tmp"
        with open(tmp, "w") as f:
            json.dump(truth, f, indent=1)
        os.replace(tmp, args.truth)


if __name__ == "__main__":
    main()
