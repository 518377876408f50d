"""Loop shape: gradient accumulation, 4 micro-batches per optimizer step.

Every micro-batch: next(loader), forward, (loss / 4).backward(); every 4th
micro-batch: optimizer.step() and zero_grad(). torchneck must count one step
per optimizer.step (not per micro-batch, not per DataLoader fetch, not per
backward). Nothing else is planted: an MLP of equal layers, a DataLoader
(num_workers=0) whose reads sleep a little (data ~10 % of the step).

    /usr/bin/python3 grad_accum.py [--steps N] [--accum K] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  micro_batches_per_step   K (also per_step_n["micro_batches"], per row)
  micro_batches            micro-batches run in all
per_step_s: step, data_wait (the 4 waits of a step summed), forward_backward,
  and apart: forward (the model and the loss), backward, optimizer (step and
  zero_grad).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, ReadBatches, mlp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--read-ms", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = mlp(a.width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    loader = DataLoader(ReadBatches(a.steps * a.accum, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)

    clock = LoopClock("grad_accum", f"gradient accumulation: {a.accum} micro-batches per optimizer.step")
    it = iter(loader)
    clock.start()
    for micro in range(a.steps * a.accum):
        x, y = clock.next(it)
        with clock.timed("forward_backward"):
            with clock.timed("forward"):
                loss = loss_fn(model(x), y) / a.accum
            with clock.timed("backward"):
                loss.backward()
        clock.count("micro_batches")
        if (micro + 1) % a.accum == 0:
            with clock.timed("optimizer"):
                opt.step()
            clock.boundary()
            with clock.timed("optimizer"):
                opt.zero_grad()
            step = micro // a.accum
            if step % 10 == 0:
                print(f"step {step:3d}  loss {a.accum * loss.item():.4f}", flush=True)
    clock.stop()
    gt = clock.write(a.truth, {"micro_batches_per_step": a.accum, "micro_batches": a.steps * a.accum})
    print(f"grad_accum: {gt['steps']} optimizer steps of {a.accum} micro-batches in "
          f"{gt['loop_wall_s']:.2f} s, data {100 * gt['shares']['data_wait']:.1f} % "
          f"(after the first step {100 * gt['shares_after_first_step']['data_wait']:.1f} %), "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
