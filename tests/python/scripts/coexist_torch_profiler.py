"""Uses torch's own profilers and prints what they saw, as JSON: the same
under plain Python and under torchneck. Then runs a Python function a known
number of times after its profiler has ended.
Usage: coexist_torch_profiler.py profiler|stack|schedule|autograd"""

import json
import sys

import torch

mode = sys.argv[1]
x = torch.randn(16, 16)


def step():
    return torch.relu(x @ x).sum()


def after_profiling():
    return sum(range(50))


if mode == "autograd":
    with torch.autograd.profiler.profile() as prof:
        for _ in range(4):
            step()
    averages = prof.key_averages()
elif mode == "schedule":
    # profiling turns on inside step(), from the schedule, not at __enter__
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched) as prof:
        for _ in range(5):
            step()
            prof.step()
    averages = prof.key_averages()
else:
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=cpu, with_stack=(mode == "stack")) as prof:
        for _ in range(4):
            step()
    averages = prof.key_averages()

counts = {e.key: e.count for e in averages if e.key in ("aten::mm", "aten::relu")}
after = [after_profiling() for _ in range(7)]
print(json.dumps({"mode": mode, "counts": counts, "after_calls": len(after)}))
