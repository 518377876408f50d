"""A training loop whose resident memory grows step after step, the classic
way: a loss summed across steps as a tensor keeps each step's autograd graph
alive through the running sum. Here it is the loss of a held-out batch,
computed for logging with autograd on and never backpropagated, so its graph
keeps the activations it saved (~10 MiB a step) on every torch: backward()
frees the saved tensors of the graph it runs through, which on torch 2.x
leaves a summed *training* loss holding only the graph's nodes. With --clean
it sums `val_loss.item()` instead and memory stays flat.

The script records its own resident memory (/proc/self/statm) at the end of
every step and writes it to the JSON file given as its first argument: the
test's ground truth, taken in the same run. Each step sleeps 50 ms (a
stand-in for loading a batch) so that the 100 ms memory sampler sees ~20
samples."""
import json
import os
import sys
import time

import torch

STEPS = 40
N = 1 << 19  # 2 MiB of float32
out_path = sys.argv[1]
clean = "--clean" in sys.argv[2:]
torch.manual_seed(0)
page = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page


w = torch.nn.Parameter(torch.ones(N))
opt = torch.optim.SGD([w], lr=1e-4)


def train():
    total_val_loss = 0
    readings = []
    for step in range(STEPS):
        time.sleep(0.05)
        x = torch.randn(N)
        h = torch.tanh(x * w)
        loss = (h * h).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        xv = torch.randn(N)  # a held-out batch, for logging
        hv = torch.tanh(xv * w)
        val_loss = (hv * hv).mean()
        if clean:
            total_val_loss += val_loss.item()
        else:
            total_val_loss += val_loss
        readings.append(rss_bytes())
    return total_val_loss, readings


_, rss = train()
with open(out_path, "w") as f:
    json.dump({"rss": rss, "steps": STEPS, "clean": clean}, f)
