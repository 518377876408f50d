"""Loop shape: a checkpoint (torch.save of model + optimizer state) every 5 steps.

The model carries a large frozen feature table (nn.Embedding.from_pretrained,
freeze=True: looked up each step, cheap, never trained, but part of the
state_dict), so each torch.save writes ~20 MB to a temporary file: a clear
periodic stall, a planted ~15-30 % of the loop's wall time, every 5th step.
The save runs at the top of the iteration after every 5th step (before its
next(loader)), so it lies in rows 5, 10, 15, ... (the step after it).
torchneck must report periodic_stall with period_steps == 5 naming the save.
Nothing else is planted: equal Linear layers, a DataLoader (num_workers=0)
whose reads sleep a little.

    /usr/bin/python3 checkpoint_every_k.py [--steps N] [--every K] [--table-rows R] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  save_every          K
  saves               how many torch.save calls
  saved_after_steps   the step counts (1-based) each save followed
  save_in_row         the row (torchneck step) each save lies in
  save_wall_s         [seconds of each torch.save]
  save_s              their sum; save_share = save_s / steps_wall_s
  checkpoint_bytes    the file's size
per_step_s: step, data_wait, save (the torch.save in that row, else 0),
  forward (the model and the loss), backward, optimizer (step and zero_grad).
"""
import time

_T0 = time.perf_counter()

import argparse
import os
import shutil
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from looptruth import LoopClock, mlp


class Lookups(Dataset):
    """Pre-batched (DataLoader(batch_size=None)): ids into the feature table, targets."""

    def __init__(self, n, batch, rows, width, read_s, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, rows, (16, batch), generator=g)
        self.y = torch.randn(16, batch, width, generator=g)
        self.n, self.read_s = n, read_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.read_s)
        return self.ids[i % 16], self.y[i % 16]


class Net(nn.Module):
    def __init__(self, rows, width):
        super().__init__()
        self.table = nn.Embedding.from_pretrained(torch.randn(rows, width), freeze=True)
        self.body = mlp(width, 4)

    def forward(self, ids):
        return self.body(self.table(ids))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--table-rows", type=int, default=30000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = Net(a.table_rows, a.width)
    opt = torch.optim.SGD([q for q in model.parameters() if q.requires_grad], lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    loader = DataLoader(Lookups(a.steps, a.batch, a.table_rows, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)
    tmp = tempfile.mkdtemp(prefix="torchneck-ckpt-")
    path = os.path.join(tmp, "last.pt")

    clock = LoopClock("checkpoint_every_k", f"torch.save of model + optimizer every {a.every} steps")
    pc = time.perf_counter
    save_wall, saved_after, save_in_row = [], [], []
    try:
        it = iter(loader)
        clock.start()
        for step in range(a.steps):
            if step > 0 and step % a.every == 0:
                t = pc()
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, path)
                dt = pc() - t
                clock.add("save", dt)
                save_wall.append(dt)
                saved_after.append(step)
                save_in_row.append(len(clock.rows))
            ids, y = clock.next(it)
            with clock.timed("forward"):
                loss = loss_fn(model(ids), y)
            with clock.timed("backward"):
                loss.backward()
            with clock.timed("optimizer"):
                opt.step()
            clock.boundary()
            with clock.timed("optimizer"):
                opt.zero_grad()
            if step % 10 == 0:
                print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)
        clock.stop()
        size = os.path.getsize(path) if save_wall else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    s = clock.summary()
    extra = {"save_every": a.every, "saves": len(save_wall), "saved_after_steps": saved_after,
             "save_in_row": save_in_row, "save_wall_s": save_wall, "save_s": sum(save_wall),
             "save_share": sum(save_wall) / s["steps_wall_s"], "checkpoint_bytes": size}
    gt = clock.write(a.truth, extra)
    print(f"checkpoint_every_k: {gt['steps']} steps, {len(save_wall)} saves of {size / 1e6:.1f} MB "
          f"in rows {save_in_row} ({', '.join(f'{1e3 * t:.0f}' for t in save_wall)} ms) = "
          f"{100 * gt['save_share']:.1f} % of the steps' wall time; median step "
          f"{1e3 * sorted(s['per_step_s']['step'])[s['steps'] // 2]:.1f} ms; data "
          f"{100 * gt['shares']['data_wait']:.1f} %; script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
