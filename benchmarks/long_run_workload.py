"""A long run of tiny operators for the memory-bound measurement (issue 6):
STEPS training steps of a small model, each with ADDS extra aten::add calls,
so STEPS x ADDS operator calls at least (10^6 with the defaults). Records its
own resident memory (/proc/self/statm) at every tenth of the run and writes
{"rss_mb": [...], "adds": N, "steps": S} to --out.

    python long_run_workload.py --out PATH [--steps 10000] [--adds 100]
"""
import argparse
import json
import os

import torch


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--adds", type=int, default=100)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(4)
    adds = 0
    marks = []
    every = max(1, a.steps // 10)
    for step in range(a.steps):
        y = x
        for _ in range(a.adds):
            y = y + 1
            adds += 1
        loss = model(y * 1e-3).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % every == 0:
            marks.append(rss_mb())
    with open(a.out, "w") as f:
        json.dump({"rss_mb": marks, "adds": adds, "steps": a.steps}, f)


if __name__ == "__main__":
    main()
