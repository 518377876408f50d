"""Loop shape: an evaluation pass every 10 training steps.

After every 10th training step (not after the last one) the loop runs a
validation pass: model.eval(), torch.no_grad(), its own validation DataLoader
(several batches, forward + loss only), then model.train(). The validation
set is large enough that evaluation takes a planted ~25-35 % of the loop's
wall time. torchneck must count only the training steps (the validation
loader's fetches are no steps) and report evaluation as such
(evaluation_heavy); an evaluation pass lies in the step after the one it
follows (it runs after optimizer.step).

    /usr/bin/python3 eval_in_loop.py [--steps N] [--eval-every K] [--val-batches B] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  training_steps       == steps
  eval_every           K
  evaluation_passes    how many passes ran
  eval_after_steps     the training steps (1-based count) each pass followed
  eval_in_row          the row (torchneck step) each pass lies in
  eval_wall_s          [seconds of each pass]
  evaluation_s         their sum
  evaluation_share     evaluation_s / steps_wall_s (the steps' wall time: loop
                       start to the last optimizer.step; every pass lies in it)
  evaluation_share_of_loop  evaluation_s / loop_wall_s
  train_data_share_steady_rows  data share of the rows without a pass, after the first
per_step_s: step, data_wait (training loader only), eval (the pass in that
  row), eval_data_wait (the validation loader's waits in that row), forward
  (the model and the loss), backward, optimizer (step and zero_grad).
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
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--val-batches", type=int, default=4)
    p.add_argument("--val-batch", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = mlp(a.width, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    train = DataLoader(ReadBatches(a.steps, a.batch, a.width, a.read_ms / 1000, a.seed),
                       batch_size=None, num_workers=0)
    val = DataLoader(ReadBatches(a.val_batches, a.val_batch, a.width, a.read_ms / 1000, a.seed + 1),
                     batch_size=None, num_workers=0)

    clock = LoopClock("eval_in_loop", f"evaluation pass every {a.eval_every} steps")
    pc = time.perf_counter
    eval_wall, eval_after, eval_in_row = [], [], []

    def evaluate():
        t = pc()
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            vit = iter(val)
            while True:
                try:
                    vx, vy = clock.next(vit, key="eval_data_wait")
                except StopIteration:
                    break
                total += loss_fn(model(vx), vy).item()
                n += 1
        model.train()
        dt = pc() - t
        clock.add("eval", dt)
        eval_wall.append(dt)
        return total / max(1, n)

    it = iter(train)
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
        done = step + 1
        if done % a.eval_every == 0 and done < a.steps:
            eval_after.append(done)
            eval_in_row.append(len(clock.rows))
            vloss = evaluate()
            print(f"step {done:3d}  train loss {loss.item():.4f}  val loss {vloss:.4f}", flush=True)
    clock.stop()
    s = clock.summary()
    ev_s = sum(eval_wall)
    per = s["per_step_s"]
    keep = [i for i in range(1, s["steps"]) if i not in eval_in_row]
    extra = {"training_steps": s["steps"], "eval_every": a.eval_every,
             "evaluation_passes": len(eval_wall), "eval_after_steps": eval_after,
             "eval_in_row": eval_in_row, "eval_wall_s": eval_wall, "evaluation_s": ev_s,
             "evaluation_share": ev_s / s["steps_wall_s"],
             "evaluation_share_of_loop": ev_s / s["loop_wall_s"],
             "train_data_share_steady_rows": sum(per["data_wait"][i] for i in keep) /
                                             sum(per["step"][i] for i in keep)}
    gt = clock.write(a.truth, extra)
    print(f"eval_in_loop: {gt['steps']} training steps, {len(eval_wall)} evaluation passes "
          f"({', '.join(f'{1e3 * t:.0f}' for t in eval_wall)} ms) = "
          f"{100 * gt['evaluation_share']:.1f} % of the steps' wall time; training data "
          f"{100 * gt['train_data_share_steady_rows']:.1f} % of the rows without a pass; "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
