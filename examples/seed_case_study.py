"""The seed article's case study, small enough for a CPU: three problems in
one training script, and (--fixed) the same script with the three fixes.

The problems (docs/case-study.md walks through finding and fixing them):
1. data loading in the main process with a costly transform: each sample
   is "decoded" (a 4 ms wait, like reading a file) and augmented (random
   crop, flip, per-channel normalisation) in __getitem__, num_workers=0;
2. a fully connected layer that dominates forward and backward: fc,
   Linear(4096, 512), after a small conv stem;
3. float32 throughout: on a CUDA machine the model runs without mixed
   precision (on a CPU there is nothing to fix here: CPU autocast needs
   bfloat16 support in the hardware to pay, and the fix is left out).

--fixed applies the article's three fixes: DataLoader(num_workers=2,
persistent_workers=True), a lighter head (fc of 256 units), and on CUDA
autocast(float16) with a GradScaler.

    /usr/bin/python3 examples/seed_case_study.py [--fixed] [--steps N] [--ground-truth PATH]
"""
import time

_SCRIPT_T0 = time.perf_counter()

import argparse
import json
import os

from ground_truth import StepClock  # examples/ground_truth.py
from heavy_linear import FatHeadNet  # a conv stem, fc (the planted layer), a classifier
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

EXAMPLE = "seed_case_study"
PLANTED = "main-process loading with a costly transform; one dominant fc layer; float32 on CUDA"


class Images(Dataset):
    """Synthetic uint8 images "decoded" and augmented one by one."""

    def __init__(self, length, seed, decode_s, pool=128):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (pool, 3, 40, 40), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 10, (pool,), generator=g)
        self.mean = torch.tensor([0.49, 0.48, 0.45]).view(3, 1, 1)
        self.std = torch.tensor([0.25, 0.24, 0.26]).view(3, 1, 1)
        self.length, self.decode_s = length, decode_s

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        k = idx % len(self.labels)
        time.sleep(self.decode_s)  # reading and decoding the file
        img = self.images[k].float() / 255
        top, left = torch.randint(0, 9, (2,)).tolist()
        img = img[:, top:top + 32, left:left + 32]
        if torch.rand(()) < 0.5:
            img = img.flip(2)
        return (img - self.mean) / self.std, self.labels[k]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixed", action="store_true", help="the three fixes")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--decode-ms", type=float, default=4.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ground-truth", metavar="PATH")
    args = p.parse_args()
    args.num_workers = 2 if args.fixed else 0  # fix 1 (StepClock.summary reports it)
    torch.manual_seed(args.seed)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    data = Images(args.steps * args.batch_size, args.seed, args.decode_ms / 1000)
    if args.fixed:
        loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=2,
                            persistent_workers=True, pin_memory=cuda)
    else:
        loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=0)
    model = FatHeadNet(256 if args.fixed else 512).to(device)  # problem 2 at 512; fix 2: a lighter head
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    amp = args.fixed and cuda  # fix 3, where it pays
    scaler = torch.cuda.amp.GradScaler() if amp else None

    clock = StepClock(EXAMPLE, PLANTED, _SCRIPT_T0)
    pc = time.perf_counter
    t_prev = clock.start()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        t_data = pc()
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = loss_fn(model(x), y)
        t_fwd = pc()
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        t_bwd = pc()
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        t_opt = pc()
        if step % 20 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
        t_end = pc()
        clock.rows.append((t_end - t_prev, t_data - t_prev, t_fwd - t_data, t_bwd - t_fwd, t_opt - t_bwd))
        t_prev = t_end
    clock.stop()
    gt = clock.summary(args, {"fixed": args.fixed, "amp": amp})
    steps = gt["per_step_s"]["step"][3:]
    print(f"{EXAMPLE}{' (fixed)' if args.fixed else ''}: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, "
          f"{1e3 * sum(steps) / max(1, len(steps)):.1f} ms a step after 3, data "
          f"{100 * gt['shares_after_first_step']['data_wait']:.1f} %", flush=True)
    if args.ground_truth:
        tmp = args.ground_truth + ".tmp"
        with open(tmp, "w") as f:
            json.dump(gt, f, indent=1)
        os.replace(tmp, args.ground_truth)


if __name__ == "__main__":
    main()
