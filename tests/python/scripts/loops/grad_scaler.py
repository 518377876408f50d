"""Loop shape: optimizer steps skipped on overflow, as torch.cuda.amp.GradScaler does.

What GradScaler really does (mixed precision on a GPU): the loss is multiplied
by a scale S (65536 at first) before backward so fp16 gradients do not
underflow; scaler.step(optimizer) first unscales the gradients (x 1/S) and
checks them all for inf/NaN (one fused kernel,
_amp_foreach_non_finite_check_and_unscale_); if any is found, optimizer.step()
is NOT called for that iteration; scaler.update() then halves S (backoff),
and doubles it again after 2000 clean iterations (growth). On a CPU-only
torch 1.13, GradScaler(enabled=True) warns and disables itself (every call is
a pass-through), so this script emulates it by hand: the same scale /
unscale / isfinite check / skip / backoff, with an overflow planted every 5th
iteration (the scaled loss is multiplied by inf, so the gradients really
are inf and the check really finds them).

So there are more iterations than optimizer steps: torchneck must count the
optimizer steps (a step ending at each optimizer.step; a skipped iteration's
work belongs to the step that follows it, which is about twice as long, every
4th step). Data: a DataLoader (num_workers=0) whose reads sleep a little.

    /usr/bin/python3 grad_scaler.py [--iters N] [--skip-every K] [--real] [--truth PATH]

--real: torch's own torch.amp.GradScaler("cpu") (torch >= 2.3; Debian 13's
2.6 has it) instead of the emulation: scaler.scale(loss).backward(),
scaler.step(opt), scaler.update(), with the same planted overflow; a skipped
step is one after which the scale went down.

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  iterations          loop iterations (forward + backward each)
  optimizer_steps     optimizer.step() calls (== steps)
  skipped_iterations  the iterations whose step was skipped (0-based)
  skipped_in_row      the row (torchneck step) each skipped iteration's work lies in
  final_scale         the scale after the backoffs
per_step_n: iterations (1, or 2 in a row that holds a skipped iteration).
per_step_s: step, data_wait, unscale_check (unscale + inf/NaN check), forward
  (the model and the loss; the emulation's scaling too), and, in the
  emulation only, backward and optimizer (step and zero_grad).
"""
import time

_T0 = time.perf_counter()

import argparse
import math

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, ReadBatches, mlp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=36)
    p.add_argument("--skip-every", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--real", action="store_true")
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = mlp(a.width, 4)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    loss_fn = nn.MSELoss()
    loader = DataLoader(ReadBatches(a.iters, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)

    scaler = torch.amp.GradScaler("cpu") if a.real else None
    scale, backoff = 65536.0, 0.5
    skipped, skipped_in_row, steps = [], [], 0
    clock = LoopClock("grad_scaler", f"optimizer.step skipped on (planted) overflow every {a.skip_every}th iteration")
    it = iter(loader)
    clock.start()
    for i in range(a.iters):
        x, y = clock.next(it)
        clock.count("iterations")
        with clock.timed("forward"):
            loss = loss_fn(model(x), y)
        overflow = (i + 1) % a.skip_every == 0  # planted: the scaled loss overflows
        if scaler is not None:  # torch's own GradScaler
            scaler.scale(loss * (math.inf if overflow else 1.0)).backward()
            before = scaler.get_scale()
            with clock.timed("unscale_check"):
                scaler.unscale_(opt)
            scaler.step(opt)  # calls opt.step() only when the gradients are finite
            scaler.update()
            if scaler.get_scale() < before:
                skipped.append(i)
                skipped_in_row.append(len(clock.rows))
            else:
                clock.boundary()
                steps += 1
            scale = scaler.get_scale()
            opt.zero_grad()
            continue
        with clock.timed("forward"):
            scaled = loss * (math.inf if overflow else scale)
        with clock.timed("backward"):
            scaled.backward()  # scaler.scale(loss).backward()
        with clock.timed("unscale_check"):  # scaler.step(opt), first half: unscale_, check
            inv = 1.0 / scale
            found_inf = False
            for q in params:
                q.grad.mul_(inv)
                found_inf |= not bool(torch.isfinite(q.grad).all())
        if found_inf:  # scaler.step skips optimizer.step; scaler.update backs off
            skipped.append(i)
            skipped_in_row.append(len(clock.rows))
            scale *= backoff
        else:
            with clock.timed("optimizer"):
                opt.step()
            clock.boundary()
            steps += 1
        with clock.timed("optimizer"):
            opt.zero_grad()
        if i % 10 == 0:
            print(f"iter {i:3d}  loss {loss.item():.4f}  scale {scale:g}", flush=True)
    clock.stop()
    gt = clock.write(a.truth, {"iterations": a.iters, "optimizer_steps": steps,
                               "skipped_iterations": skipped, "skipped_in_row": skipped_in_row,
                               "final_scale": scale})
    print(f"grad_scaler: {a.iters} iterations, {steps} optimizer steps ({len(skipped)} skipped: "
          f"{skipped}) in {gt['loop_wall_s']:.2f} s, data {100 * gt['shares']['data_wait']:.1f} %, "
          f"script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
