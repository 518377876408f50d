"""Loop shape: nanoGPT's loop: batches cut from a tensor (no DataLoader), and
every K steps an evaluation: model.eval(), under torch.no_grad() a number of
forward passes on validation batches, model.train().

No DataLoader fetch marks the evaluation, and outside torchneck's detail
windows its module calls are not seen: torchneck must still find every
pass (evaluation_heavy, its share of the steps' wall time within 5 points
of the script's own) in every run, wherever the windows fall.

    /usr/bin/python3 eval_no_loader.py [--steps N] [--eval-every K] [--eval-iters I] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  evaluation_passes    how many passes ran
  eval_in_row          the row (torchneck step) each pass lies in
  evaluation_s         their summed time
  evaluation_share     evaluation_s / steps_wall_s
per_step_s: step, eval, forward, backward, optimizer (data_wait is 0: no loader).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn

from looptruth import LoopClock, mlp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    train_x, train_y = torch.randn(4096, a.width), torch.randn(4096, a.width)
    val_x, val_y = torch.randn(1024, a.width), torch.randn(1024, a.width)
    model = mlp(a.width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()

    def get_batch(x, y):
        ix = torch.randint(0, len(x), (a.batch,))
        return x[ix], y[ix]

    clock = LoopClock("eval_no_loader", f"evaluation every {a.eval_every} steps, batches without a DataLoader")
    pc = time.perf_counter
    eval_wall, eval_in_row = [], []

    @torch.no_grad()
    def estimate_loss():
        t = pc()
        model.eval()
        losses = [loss_fn(model(vx), vy).item() for vx, vy in (get_batch(val_x, val_y) for _ in range(a.eval_iters))]
        model.train()
        dt = pc() - t
        clock.add("eval", dt)
        eval_wall.append(dt)
        return sum(losses) / len(losses)

    clock.start()
    for step in range(a.steps):
        if step % a.eval_every == 0 and step > 0:
            eval_in_row.append(len(clock.rows))
            print(f"step {step:3d}  val loss {estimate_loss():.4f}", flush=True)
        x, y = get_batch(train_x, train_y)
        with clock.timed("forward"):
            loss = loss_fn(model(x), y)
        with clock.timed("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with clock.timed("optimizer"):
            opt.step()
        clock.boundary()
    clock.stop()
    s = clock.summary()
    ev_s = sum(eval_wall)
    gt = clock.write(a.truth, {"evaluation_passes": len(eval_wall), "eval_in_row": eval_in_row,
                               "evaluation_s": ev_s, "evaluation_share": ev_s / s["steps_wall_s"]})
    print(f"eval_no_loader: {gt['steps']} steps, {len(eval_wall)} evaluation passes = "
          f"{100 * gt['evaluation_share']:.1f} % of the steps' wall time; "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
