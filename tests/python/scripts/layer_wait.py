"""Four equal Linear(64, 64) layers, trained on random data in memory (the
model is the step), of which one waits once: a forward pre-hook on layer 4
sleeps --wait-ms in one step's call, as a page fault, a lock or the
hypervisor's steal lands on whatever layer runs then.

    /usr/bin/python3 layer_wait.py [--steps N] [--wait-ms MS] [--truth PATH]

--truth PATH writes {"layer": the waiting layer's name, "wait_ms": the wait
as the hook's own clock measured it}.
"""
import argparse
import json
import time

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--wait-ms", type=float, default=80.0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    waited = []
    wait_step = a.steps // 2
    step = 0

    def wait_once(module, inputs):
        if step == wait_step:
            t0 = time.perf_counter()
            time.sleep(a.wait_ms / 1000)
            waited.append(time.perf_counter() - t0)

    model[4].register_forward_pre_hook(wait_once)
    for step in range(a.steps):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if a.truth:
        with open(a.truth, "w") as f:
            json.dump({"layer": "4", "wait_ms": 1000 * sum(waited)}, f)


if __name__ == "__main__":
    main()
