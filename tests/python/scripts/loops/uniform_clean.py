"""Loop shape: a well-balanced loop with nothing planted.

An MLP of 5 equal Linear(192, 192) layers (no layer near heavy_layer's 40 %
of the model's time), SGD with momentum (a few % of the step), cheap
in-memory data (TensorDataset, DataLoader(batch_size=64, shuffle=True,
num_workers=0): a few % of the step), 40 steps. Sized so that on the
reference machine (Debian 12, torch 1.13 with its generic BLAS, 1 intra-op
thread of 2 cores) the mean operator is ~20 us: above framework_overhead's
10 us ("tiny operators") and below cpu_threads_underused's 50 us (operators
large enough for intra-op threads). (At width 128 it was ~20 us on an
earlier machine of this project, and 9.2-9.4 us on a later AMD EPYC, where
framework_overhead rightly fired: ~580 operators a step, the same count at
192, each mm 2.25 times the work: ~21 us.) torchneck should raise no
finding of medium or high severity here.

    /usr/bin/python3 uniform_clean.py [--steps N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  layers, width, batch_size
per_step_s: step, data_wait, forward, backward, optimizer (step + zero_grad:
  zero_grad follows the step's boundary, so it lies in the next row).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from looptruth import LoopClock, mlp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--layers", type=int, default=5)
    p.add_argument("--width", type=int, default=192)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    n = a.steps * a.batch
    data = TensorDataset(torch.randn(n, a.width), torch.randn(n, a.width))
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=0)
    model = mlp(a.width, a.layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()

    clock = LoopClock("uniform_clean", "nothing planted")
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)
        with clock.timed("forward"):
            loss = loss_fn(model(x), y)
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
    gt = clock.write(a.truth, {"layers": a.layers, "width": a.width, "batch_size": a.batch})
    sh = gt["shares_after_first_step"]
    print(f"uniform_clean: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s; after the first step: "
          + ", ".join(f"{k} {100 * sh[k]:.1f} %" for k in ("data_wait", "forward", "backward", "optimizer"))
          + f"; script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
