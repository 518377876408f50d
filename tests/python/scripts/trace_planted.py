"""trace.json's planted workload: every iteration calls torch.addmm exactly
ADDMM_PER_STEP times (in forward only: their backward uses mm) and
planted_call() exactly CALLS_PER_STEP times, then one optimizer step, so the
test knows how many of each a window of N steps holds. The model's class is
named like markup, to check escaping. An optional second argument names a
module imported during the first step (from the script's folder).
Usage: trace_planted.py [STEPS [MODULE]]"""

import importlib
import sys

import torch

ADDMM_PER_STEP = 3
CALLS_PER_STEP = 1 + ADDMM_PER_STEP  # once before forward, once per addmm
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
IMPORT_IN_FIRST_STEP = sys.argv[2] if len(sys.argv) > 2 else None


def planted_call(x):
    return x


def _init(self):
    torch.nn.Module.__init__(self)
    self.w = torch.nn.Parameter(torch.randn(16, 16))
    self.b = torch.nn.Parameter(torch.zeros(16))


def _forward(self, x):
    for _ in range(ADDMM_PER_STEP):
        x = torch.addmm(self.b, planted_call(x), self.w).tanh()
    return x


Hostile = type("<img src=x onerror=alert(1)>", (torch.nn.Module,), {"__init__": _init, "forward": _forward})

model = Hostile()
opt = torch.optim.SGD(model.parameters(), lr=0.001)
data = torch.randn(8, 16)
for step in range(STEPS):
    opt.zero_grad()
    if step == 0 and IMPORT_IN_FIRST_STEP:
        importlib.import_module(IMPORT_IN_FIRST_STEP)
    planted_call(data)
    model(data).sum().backward()
    opt.step()
