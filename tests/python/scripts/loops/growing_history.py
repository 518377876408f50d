"""Loop shape: steps that get slower because state grows step after step.

uniform_clean's loop (a smaller MLP of 4 equal Linear(96, 96) layers, batch
32, SGD, cheap in-memory data), plus a common mistake: each step appends a copy of the first layers'
weights (--anchored, 3) to a Python list and adds a penalty over the whole list to the loss
(an "anchor" regulariser written as a loop over every past snapshot). Step
i so runs ~i more small operators than step 0: the steps' time rises
linearly, ~130 % from the first third's median to the last's on the
reference machine (~4 ms to ~10 ms over 60 steps), yet never twice its
neighbours' (no step is "slow"). torchneck must
report step_time_drift with the growth the script's own clock shows.

    /usr/bin/python3 growing_history.py [--steps N] [--grow-from K] [--truth PATH]

--grow-from K: snapshots are kept from step K on (0, the default: from the
  first step), so the steps before K do not grow: a run that slows down
  late, after a bounded timeline has filled (test_long_run.py).

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  history_len          snapshots kept at the end (== steps)
  anchored             layers in each snapshot
  layers, width, batch_size
per_step_s: step, data_wait, forward (the model and the loss), history (the
  penalty over the snapshots), backward, optimizer.
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
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--anchored", type=int, default=3, help="layers whose weights are snapshot")
    p.add_argument("--grow-from", type=int, default=0, help="the step snapshots are kept from")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    n = a.steps * a.batch
    data = TensorDataset(torch.randn(n, a.width), torch.randn(n, a.width))
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=0)
    model = mlp(a.width, a.layers)
    anchored = [m.weight for m in model.modules() if isinstance(m, nn.Linear)][:a.anchored]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    history = []  # the mistake: grows by one snapshot a step, every one visited each step

    clock = LoopClock("growing_history", "a penalty over a list of past weight snapshots that grows each step")
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)
        with clock.timed("forward"):
            loss = loss_fn(model(x), y)
        with clock.timed("history"):
            if step >= a.grow_from:
                history.append([w.detach().clone() for w in anchored])
                penalty = sum((w - h).abs().mean() for snap in history for w, h in zip(anchored, snap))
                loss = loss + 1e-3 * penalty / len(history)
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
    gt = clock.write(a.truth, {"history_len": len(history), "anchored": len(anchored), "layers": a.layers, "width": a.width,
                               "batch_size": a.batch})
    rows = gt["per_step_s"]["step"]
    k = len(rows) // 3
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"growing_history: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s; step {1e3 * med(rows[:k]):.2f} ms "
          f"(median, first third) -> {1e3 * med(rows[-k:]):.2f} ms (last third); "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
