"""Loop shape: two optimizers and an LR scheduler, all stepped every iteration.

An autoencoder-like model: an encoder with its own Adam, a decoder with its
own SGD; each iteration zero_grads both, runs one forward and one backward,
steps the encoder's optimizer, then the decoder's, then StepLR.step() (on the
encoder's optimizer). torchneck must count one step per iteration (the two
optimizer.step calls after one fetch are one iteration; docs/diagnosis.md),
not two. Nothing else is planted: equal Linear layers, a DataLoader
(num_workers=0) whose reads sleep a little (data ~10 %).

    /usr/bin/python3 two_optimizers.py [--iters N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  iterations         loop iterations (== steps)
  optimizer_steps    optimizer.step() calls in all (2 per iteration)
  final_lr_encoder   the encoder's learning rate after the scheduler's steps
per_step_s: step, data_wait, optimizers (both step() calls), scheduler, forward
  (both models and the loss), backward, optimizer (both zero_grad and step calls).
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
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--batch", type=int, default=96)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=1.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    encoder = mlp(a.width, 2)
    decoder = mlp(a.width, 2)
    opt_enc = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    opt_dec = torch.optim.SGD(decoder.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt_enc, step_size=10, gamma=0.5)
    loss_fn = nn.MSELoss()
    loader = DataLoader(ReadBatches(a.iters, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)

    clock = LoopClock("two_optimizers", "two optimizers (Adam, SGD) + StepLR, all stepped every iteration")
    it = iter(loader)
    clock.start()
    for i in range(a.iters):
        x, y = clock.next(it)
        with clock.timed("optimizer"):
            opt_enc.zero_grad()
            opt_dec.zero_grad()
        with clock.timed("forward"):
            loss = loss_fn(decoder(torch.relu(encoder(x))), y)
        with clock.timed("backward"):
            loss.backward()
        with clock.timed("optimizers"), clock.timed("optimizer"):
            opt_enc.step()
            opt_dec.step()
        clock.boundary()  # the 2nd optimizer.step of the iteration ends the step
        with clock.timed("scheduler"):
            sched.step()
        if i % 10 == 0:
            print(f"iter {i:3d}  loss {loss.item():.4f}  lr {sched.get_last_lr()[0]:g}", flush=True)
    clock.stop()
    gt = clock.write(a.truth, {"iterations": a.iters, "optimizer_steps": 2 * a.iters,
                               "final_lr_encoder": opt_enc.param_groups[0]["lr"]})
    print(f"two_optimizers: {a.iters} iterations ({2 * a.iters} optimizer steps) in "
          f"{gt['loop_wall_s']:.2f} s, data {100 * gt['shares']['data_wait']:.1f} %, "
          f"optimizers {100 * gt['shares']['optimizers']:.1f} %, script {time.perf_counter() - _T0:.2f} s",
          flush=True)


if __name__ == "__main__":
    main()
