"""Loop shape for `torchneck diff`: one script whose two knobs plant a
known change between two runs of it.

A model of 4 Linear layers with ReLU between (64 -> 64 -> H -> 64 -> 64) on
batches of 64 from ReadBatches (each read sleeps --read-ms, num_workers=0,
so the data share is set by construction). --read-ms moves the data phase;
--hidden H makes the middle two layers heavier or lighter (at H=1024 each
holds over 40 % of the model's time, heavy_layer's mark; at H=64 the four
are equal).

    /usr/bin/python3 diff_pair.py [--steps N] [--read-ms MS] [--hidden H] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  read_ms, hidden
per_step_s: step, data_wait, compute (forward + backward + step).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, ReadBatches


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--read-ms", type=float, default=2.0)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    loader = DataLoader(ReadBatches(a.steps, 64, 64, a.read_ms / 1000, a.seed), batch_size=None,
                        shuffle=False, num_workers=0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, 64), nn.ReLU(), nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    clock = LoopClock("diff_pair", f"reads sleep {a.read_ms} ms, hidden width {a.hidden}")
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)
        with clock.timed("compute"):
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        clock.boundary()
        opt.zero_grad()
    clock.stop()
    gt = clock.write(a.truth, {"read_ms": a.read_ms, "hidden": a.hidden})
    print(f"diff_pair: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, data "
          f"{100 * gt['shares_after_first_step']['data_wait']:.1f} %; script {time.perf_counter() - _T0:.2f} s",
          flush=True)


if __name__ == "__main__":
    main()
