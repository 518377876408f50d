"""Loop shape: torch.optim.LBFGS driven by optimizer.step(closure).

The closure (zero_grad, forward, loss, backward) runs inside optimizer.step,
several times per step (LBFGS re-evaluates the loss at every inner
iteration, up to max_iter): the forward and backward passes of a step all
lie inside Optimizer.step. One step per optimizer.step; one next(loader) per
step (a DataLoader, num_workers=0, reads sleep a little: data ~10 %).
Nothing else is planted; LBFGS's own work (flattening gradients, its two-loop
recursion over a short history, parameter updates) is measured apart as
optimizer_own = step call - closures.

    /usr/bin/python3 lbfgs_closure.py [--steps N] [--max-iter K] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  max_iter, history_size    LBFGS's settings
  closure_calls             closure calls in all (per row: per_step_n["closure_calls"])
  closure_calls_per_step    their mean
per_step_s: step, data_wait, step_call (the optimizer.step(closure) call),
  closure (time inside the closure, forward + backward + zero_grad),
  optimizer_own (step_call - closure: LBFGS's own arithmetic), forward (the
  closures' model and loss), backward (their backward), optimizer (step_call
  - forward - backward: LBFGS's arithmetic and the closures' zero_grad).
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
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--max-iter", type=int, default=4)
    p.add_argument("--history", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--width", type=int, default=96)
    p.add_argument("--read-ms", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = mlp(a.width, 4)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=a.max_iter, history_size=a.history)
    loss_fn = nn.MSELoss()
    loader = DataLoader(ReadBatches(a.steps, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)

    clock = LoopClock("lbfgs_closure", f"LBFGS optimizer.step(closure), max_iter={a.max_iter}")
    pc = time.perf_counter
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)

        def closure():
            t = pc()
            opt.zero_grad()
            with clock.timed("forward"):
                loss = loss_fn(model(x), y)
            with clock.timed("backward"):
                loss.backward()
            clock.add("closure", pc() - t)
            clock.count("closure_calls")
            return loss

        t = pc()
        loss = opt.step(closure)
        clock.add("step_call", pc() - t)
        clock.add("optimizer_own", clock.cur["step_call"] - clock.cur["closure"])
        clock.add("optimizer", clock.cur["step_call"] - clock.cur["forward"] - clock.cur["backward"])
        clock.boundary()
        if step % 10 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)
    clock.stop()
    calls = clock.summary()["per_step_n"]["closure_calls"]
    gt = clock.write(a.truth, {"max_iter": a.max_iter, "history_size": a.history,
                               "closure_calls": sum(calls),
                               "closure_calls_per_step": sum(calls) / max(1, len(calls))})
    print(f"lbfgs_closure: {gt['steps']} steps, {gt['closure_calls']} closure calls "
          f"({gt['closure_calls_per_step']:.2f} per step) in {gt['loop_wall_s']:.2f} s; "
          f"data {100 * gt['shares']['data_wait']:.1f} %, closures {100 * gt['shares']['closure']:.1f} %, "
          f"LBFGS's own {100 * gt['shares']['optimizer_own']:.1f} % of the steps; "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
