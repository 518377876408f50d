"""Planted workload for tests/python/test_flame.py.

loop() runs rounds of three phases and times each with time.perf_counter:
heavy_mm (torch.mm back to back), pure_python (arithmetic in a Python
loop) and a call to an nn.Module whose class is named like an HTML
injection, then one backward pass and an optimizer step (a step boundary). Writes the seconds to argv[1] as JSON.
"""

import json
import sys
import time

import torch

torch.manual_seed(0)
A = torch.randn(128, 128)


def heavy_mm(n):
    x = A
    for _ in range(n):
        x = torch.mm(A, A)
    return x


def pure_python(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def _forward(self, x):
    for _ in range(10):
        x = torch.mm(x, A) / 128.0
    return x


HostileModule = type("<img src=x onerror=alert(1)>", (torch.nn.Module,), {"forward": _forward})


def loop(rounds):
    seconds = {"heavy_mm": 0.0, "pure_python": 0.0, "module": 0.0}
    model = HostileModule()
    w = torch.randn(128, 128, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.0)  # a step boundary per round, outside the timed phases
    for _ in range(rounds):
        t0 = time.perf_counter()
        heavy_mm(60)
        t1 = time.perf_counter()
        pure_python(800000)
        t2 = time.perf_counter()
        model(A)
        t3 = time.perf_counter()
        torch.mm(A, w).sum().backward()
        opt.step()
        seconds["heavy_mm"] += t1 - t0
        seconds["pure_python"] += t2 - t1
        seconds["module"] += t3 - t2
    return seconds


def main():
    start = time.perf_counter()
    seconds = loop(int(sys.argv[2]) if len(sys.argv) > 2 else 16)
    seconds["loop"] = time.perf_counter() - start
    with open(sys.argv[1], "w") as f:
        json.dump(seconds, f)


if __name__ == "__main__":
    main()
