"""Loop shape: an input-bound loop whose batches arrive in bursts.

Dataset.__getitem__ waits 6 ms like I/O of a fixed throughput per worker
(each read completes 6 ms after the worker's previous one was due, whatever
the worker's own overhead: time.sleep to that deadline); batch_size 16, so a
worker needs 96 ms per batch; DataLoader(num_workers=2) runs two
workers that finish their batches at about the same time. The model (a few
small Linear + ReLU) costs ~1 ms. So the batches arrive in bursts of k=2:
one step waits ~96 ms in next(loader), the next finds its batch ready (wait
~0), and so on. A median step says little here (half the steps are short);
the data share over all steps is ~95 %. torchneck must report input_bound
with a gain above 0 and below 100 %, a data share within 5 points of the
script's own, and say the batches come in bursts.

    /usr/bin/python3 bursty_loader.py [--steps N] [--workers K] [--read-ms MS] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  workers, batch_size, read_ms   the loader's settings
  data_share_all                 data wait / wall time, all steps
  data_share_after_first         the same over steps 1.. (the first includes worker start-up)
  waits_ms                       per-step data wait, ms (== per_step_s["data_wait"] x 1000)
  long_wait_steps                steps whose wait is > half the longest after step 0
  burst_pattern_ok               from the first long wait after step 0 (the queued
                                 batches taken), long waits (> 30 % of a batch's
                                 production) at every K-th step, short at the others,
                                 over at least half the steps after step 0

The workers start their first read together (worker_init_fn waits for a
gate set just before the workers are forked): otherwise the fork of the second
worker, ~10 ms later on a loaded machine, offsets its batches for the whole
run and the "ready" steps wait that long too. The reads keep to the gate's
schedule for the same reason: with plain sleeps, a worker 2-3 % slower than
the other (a loaded 2-core machine, each worker's own profiler) drifts half a
batch behind in 20 steps, and the "ready" steps wait 30-40 ms.
per_step_s: step, data_wait, compute (forward + backward + step), and apart:
  forward (the model and the loss), backward, optimizer (step and zero_grad).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from looptruth import LoopClock


class SlowReads(Dataset):
    def __init__(self, n, width, read_s, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(256, width, generator=g)
        self.y = torch.randint(0, 10, (256,), generator=g)
        self.n, self.read_s = n, read_s
        self.gate = None  # perf_counter() at which every worker starts reading
        self.reads = 0    # reads due so far in this worker (its own copy)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        # I/O-like wait, no CPU, to this worker's next deadline on the
        # gate's schedule (one read per read_s); sleeps from now without one.
        self.reads += 1
        due = None if self.gate is None else self.gate + self.reads * self.read_s
        time.sleep(self.read_s if due is None else max(0.0, due - time.perf_counter()))
        return self.x[i % 256], self.y[i % 256]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--read-ms", type=float, default=6.0)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(a.width, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gate = 0.0
    data = SlowReads(a.steps * a.batch, a.width, a.read_ms / 1000, a.seed)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        worker_init_fn=lambda _: time.sleep(max(0.0, gate - time.perf_counter())))

    clock = LoopClock("bursty_loader", f"__getitem__ sleeps {a.read_ms} ms, batch {a.batch}, "
                                       f"num_workers={a.workers}: batches arrive in bursts")
    gate = time.perf_counter() + 0.04 * a.workers  # after every worker's fork, yet short next to the run
    data.gate = gate  # the workers, forked by iter(), read it from their copy
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)
        with clock.timed("compute"):
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
    del it  # shut the workers down before the summary

    s = clock.summary()
    waits = s["per_step_s"]["data_wait"]
    steps = s["per_step_s"]["step"]
    k = max(1, a.workers)
    batch_s = a.batch * a.read_ms / 1000
    rest = waits[1:]
    top = max(rest) if rest else 0.0
    long_steps = [i for i, w in enumerate(waits) if i > 0 and w > top / 2]
    # One cut, at 30 % of a batch's production, between the steps that wait
    # and those that find their batch ready: a long wait shrinks by however
    # late the step before it came (a loaded machine: 81 then 43 ms in CI,
    # from a nominal 90), a ready step's wait grows only if a worker falls
    # behind.
    # From the first long wait after step 0 on: the steps before it take
    # the batches the workers queued while step 0 waited for theirs
    # (prefetch_factor 2 a worker, more while the first steps run slow:
    # 2-10 steps on an AMD EPYC in trixie, plain runs too), and that
    # stretch must leave at least half the steps to show the bursts.
    first = next((i for i, w in enumerate(waits) if i > 0 and w > 0.3 * batch_s), None)
    ok = (bool(rest) and k > 1 and first is not None and len(waits) - first >= len(rest) / 2
          and all((w > 0.3 * batch_s) == ((i - first) % k == 0) for i, w in enumerate(waits) if i >= first))
    extra = {"workers": a.workers, "batch_size": a.batch, "read_ms": a.read_ms,
             "batch_production_s": batch_s,
             "data_share_all": sum(waits) / sum(steps),
             "data_share_after_first": sum(waits[1:]) / sum(steps[1:]) if len(steps) > 1 else 0.0,
             "waits_ms": [round(1e3 * w, 2) for w in waits],
             "long_wait_steps": long_steps, "burst_pattern_ok": ok}
    gt = clock.write(a.truth, extra)
    print("bursty_loader: waits ms " + " ".join(f"{w:.0f}" for w in gt["waits_ms"]), flush=True)
    print(f"bursty_loader: {gt['steps']} steps in {gt['loop_wall_s']:.2f} s, data "
          f"{100 * gt['data_share_all']:.1f} % (after the first step "
          f"{100 * gt['data_share_after_first']:.1f} %), long waits at steps {long_steps}, "
          f"bursts of {k}: {'yes' if ok else 'NO'}; script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
