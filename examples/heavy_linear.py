"""Planted bottleneck: one oversized fully connected layer (the seed article's case).

A small convolutional feature extractor feeds an oversized nn.Linear ("fc",
4096 -> 1024 by default: 4.2 M weights, 99.7 % of the model) followed by a
small classifier. That one layer dominates both forward and backward time;
data loading is cheap (a fixed in-memory pool, num_workers=0).

Expected verdict: the model is compute-bound in one layer, fc, which takes
most of forward and most of backward; slim it (smaller hidden size, pooling
before it) for the biggest gain.

    /usr/bin/python3 examples/heavy_linear.py [--steps N] [--seed S]
        [--ground-truth PATH] [--hidden H] [--batch-size B]

--ground-truth PATH writes what the script measured about itself with
time.perf_counter (five clock reads per step, no profiler) and, through module
and tensor hooks (four clock reads per step), the time of fc alone:
forward = fc's forward pre-hook to its forward hook; backward = from the moment
the gradient of fc's output arrives (a hook on the output tensor) to the moment
the gradient of its input is ready (a hook on the input tensor), which covers
fc's AddmmBackward, TBackward and the weight/bias AccumulateGrad nodes.
"""
import time

_SCRIPT_T0 = time.perf_counter()

import argparse
import json
import os
import resource
import statistics
import sys

from ground_truth import StepClock  # examples/ground_truth.py
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

EXAMPLE = "heavy_linear"
PLANTED = "compute: one oversized nn.Linear (fc) dominates forward and backward"


# --- ground truth: measured by the script itself, without any profiler -----
def write_ground_truth(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# --- data and model -----------------------------------------------------------
class PoolImages(Dataset):
    """Synthetic images from a fixed in-memory pool: loading is cheap."""

    def __init__(self, length, seed, pool=256):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(pool, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (pool,), generator=g)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        k = idx % len(self.labels)
        return self.images[k], self.labels[k]


class FatHeadNet(nn.Module):
    def __init__(self, hidden, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 16 * 16, hidden)  # the planted bottleneck
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc(torch.flatten(x, 1)))
        return self.classifier(x)


class LayerClock:
    """Times one module's forward and backward with hooks (4 clock reads/step)."""

    def __init__(self, module):
        self.fwd = []
        self.bwd = []
        self._t_fwd0 = self._t_bwd0 = 0.0
        module.register_forward_pre_hook(self._pre)
        module.register_forward_hook(self._post)

    def _pre(self, module, inputs):
        x = inputs[0]
        if x.requires_grad:
            x.register_hook(self._input_grad)
        self._t_fwd0 = time.perf_counter()

    def _post(self, module, inputs, output):
        self.fwd.append(time.perf_counter() - self._t_fwd0)
        if output.requires_grad:
            output.register_hook(self._output_grad)

    def _output_grad(self, grad):
        self._t_bwd0 = time.perf_counter()

    def _input_grad(self, grad):
        self.bwd.append(time.perf_counter() - self._t_bwd0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--print-every", type=int, default=10)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    data = PoolImages(args.steps * args.batch_size, args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers)
    model = FatHeadNet(args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    fc_clock = LayerClock(model.fc)

    clock = StepClock(EXAMPLE, PLANTED, _SCRIPT_T0)
    rows = clock.rows
    pc = time.perf_counter
    t_prev = clock.start()
    for step, (x, y) in enumerate(loader):
        t_data = pc()
        loss = loss_fn(model(x), y)
        t_fwd = pc()
        loss.backward()
        t_bwd = pc()
        opt.step()
        opt.zero_grad()
        t_opt = pc()
        if step % args.print_every == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}", flush=True)
        t_end = pc()
        rows.append((t_end - t_prev, t_data - t_prev, t_fwd - t_data,
                     t_bwd - t_fwd, t_opt - t_bwd))
        t_prev = t_end
    clock.stop()

    gt = clock.summary(args)
    tot = gt["totals_s"]
    fc_f, fc_b = sum(fc_clock.fwd), sum(fc_clock.bwd)
    n_params = sum(p.numel() for p in model.parameters())
    gt["layer"] = {
        "name": "fc",
        "shape": [16 * 16 * 16, args.hidden],
        "params": model.fc.weight.numel() + model.fc.bias.numel(),
        "share_of_model_params": (model.fc.weight.numel()
                                  + model.fc.bias.numel()) / n_params,
        "forward_s": fc_f,
        "backward_s": fc_b,
        "share_of_forward": fc_f / tot["forward"] if tot["forward"] else 0.0,
        "share_of_backward": fc_b / tot["backward"] if tot["backward"] else 0.0,
        "share_of_step": (fc_f + fc_b) / tot["step"] if tot["step"] else 0.0,
        "per_step_forward_s": [round(v, 7) for v in fc_clock.fwd],
        "per_step_backward_s": [round(v, 7) for v in fc_clock.bwd],
        "measurement": "module pre/post forward hooks; backward from the "
                       "output-gradient hook to the input-gradient hook",
    }
    print(f"{EXAMPLE}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, fc "
          f"{100 * gt['layer']['share_of_forward']:.1f} % of forward, "
          f"{100 * gt['layer']['share_of_backward']:.1f} % of backward",
          flush=True)
    if args.ground_truth:
        write_ground_truth(args.ground_truth, gt)


if __name__ == "__main__":
    main()
