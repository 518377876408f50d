"""GPU planted case: a float32 model whose one wide Linear dominates the
GPU time, on CUDA, 40 steps. The script times every layer's forward and
backward on the GPU itself with CUDA events (module hooks; its own clock,
no profiler) and writes, to the JSON file given as its first argument, per
optimizer step (from 1) each layer's forward and backward milliseconds and
the step's wall time: the truth scripts/gpu-check compares torchneck's
per-layer GPU times with."""
import json
import sys
import time

import torch
from torch import nn

out = sys.argv[1]
dev = "cuda"
torch.manual_seed(0)
model = nn.Sequential()
model.add_module("embed", nn.Linear(512, 1024))
model.add_module("act", nn.ReLU())
model.add_module("wide", nn.Linear(1024, 16384))
model.add_module("act2", nn.ReLU())
model.add_module("head", nn.Linear(16384, 10))
model = model.to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 512, device=dev)
y = torch.randint(0, 10, (512,), device=dev)
layers = ["embed", "wide", "head"]
events = []  # per step: name -> [fwd start, fwd end, bwd start, bwd end]


def ev():
    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e


for name in layers:
    m = getattr(model, name)
    m.register_forward_pre_hook(lambda mod, inp, n=name: events[-1].setdefault(n, {}).__setitem__("f0", ev()))
    m.register_forward_hook(lambda mod, inp, o, n=name: events[-1][n].__setitem__("f1", ev()))
    m.register_full_backward_pre_hook(lambda mod, g, n=name: events[-1][n].__setitem__("b0", ev()))
    m.register_full_backward_hook(lambda mod, gi, go, n=name: events[-1][n].__setitem__("b1", ev()))

rows = []
for step in range(40):
    events.append({})
    t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    rows.append(time.perf_counter() - t0)
per_step = []
for e in events:
    per_step.append({n: {"forward_ms": e[n]["f0"].elapsed_time(e[n]["f1"]),
                         "backward_ms": e[n]["b0"].elapsed_time(e[n]["b1"])} for n in layers})
with open(out, "w") as f:
    json.dump({"steps": len(rows), "step_s": rows, "layers": per_step}, f)
