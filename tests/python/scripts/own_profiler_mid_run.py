"""A training loop that starts torch.profiler itself after optimizer step
START (while torchneck's GPU window, if any, is open), records 3 steps, and
writes how many aten::addmm calls its profiler saw, and its step count, as
JSON to the file given as its first argument: the same under plain Python
and under torchneck (the script's profiler comes first)."""
import json
import sys

import torch

START = 7
STEPS = 20
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 1)
prof = None
for step in range(1, STEPS + 1):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == START:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.start()
    elif step == START + 3:
        prof.stop()
addmm = sum(e.count for e in prof.key_averages() if e.key == "aten::addmm")
with open(sys.argv[1], "w") as f:
    json.dump({"addmm": addmm, "steps": STEPS}, f)
