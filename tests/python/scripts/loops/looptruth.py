"""The ground truth the loop-shape scripts in this folder measure about
themselves, with time.perf_counter only (no profiler), in the spirit of
examples/ground_truth.py's StepClock.

Rows are cut where torchneck cuts steps (docs/diagnosis.md): a row ends right
after optimizer.step() returns (with K optimizers, after the K-th of an
iteration), so whatever runs after the step (zero_grad, logging, evaluation,
a checkpoint) belongs to the next row, as it belongs to the next step in the
profile. Row 0 starts at LoopClock.start(); the time after the last step is
kept apart as "trailing".

JSON written by LoopClock.write(PATH, extra) (schema "torchneck-loop-truth/1"):
  shape, planted, argv, pid, torch_version, torch_threads, cpu_cores, python_version,
  measurement       how it was measured
  steps             optimizer steps (rows): what torchneck must count as steps
  loop_wall_s       start() -> stop()
  steps_wall_s      sum of the rows: start() -> the end of the last step
  per_step_s        {"step": [...], "data_wait": [...], <shape keys>: [...]} seconds per row
                    (data_wait: time inside next(loader) of the training loader)
  per_step_n        {<count key>: [...]} counts per row (micro-batches, closure calls, ...)
  totals_s          per_step_s summed
  shares            totals_s / steps_wall_s (all rows)
  shares_after_first_step  the same over rows 1..
  trailing          {"s": seconds after the last step, <keys>: what they held}
  main_runqueue_share  the main thread's wait for a CPU while runnable over the
                    loop (/proc/thread-self/schedstat) / loop_wall_s; null if unknown
  ...               whatever the script adds (documented in its docstring)
"""
import json
import os
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

import torch

SCHEMA = "torchneck-loop-truth/1"
pc = time.perf_counter


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def runqueue_s():
    """Seconds this thread has waited for a CPU while runnable (Linux
    schedstat), or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class LoopClock:
    def __init__(self, shape, planted):
        self.shape, self.planted = shape, planted
        self.rows = []  # dicts: "step" seconds, other *seconds* keys, count keys
        self.count_keys = set()
        self.cur = defaultdict(float)
        self.t0 = self.t_prev = self.t_end = 0.0
        self.runqueue0 = self.runqueue1 = None

    # -- the loop calls these ------------------------------------------------
    def start(self):
        self.runqueue0 = runqueue_s()
        self.t0 = self.t_prev = pc()
        return self.t0

    def next(self, it, key="data_wait"):
        """next(it), its wait added to the current row (StopIteration too)."""
        t = pc()
        try:
            return next(it)
        finally:
            self.cur[key] += pc() - t

    @contextmanager
    def timed(self, key):
        t = pc()
        try:
            yield
        finally:
            self.cur[key] += pc() - t

    def add(self, key, seconds):
        self.cur[key] += seconds

    def count(self, key, n=1):
        self.count_keys.add(key)
        self.cur[key] += n

    def boundary(self):
        """Call right after optimizer.step() returns: closes the current row."""
        t = pc()
        row = self.cur
        row["step"] = t - self.t_prev
        self.rows.append(row)
        self.cur = defaultdict(float)
        self.t_prev = t
        return t

    def stop(self):
        self.t_end = pc()
        self.runqueue1 = runqueue_s()

    # -- the JSON ------------------------------------------------------------
    def summary(self, extra=None):
        rows = self.rows
        keys = sorted({k for r in rows for k in r} | {"step", "data_wait"} | set(self.cur))
        sec_keys = [k for k in keys if k not in self.count_keys]
        per_s = {k: [round(r.get(k, 0.0), 7) for r in rows] for k in sec_keys}
        per_n = {k: [int(r.get(k, 0)) for r in rows] for k in sorted(self.count_keys)}
        totals = {k: sum(v) for k, v in per_s.items()}
        steps_wall = totals["step"] or 1.0
        after = {k: sum(v[1:]) for k, v in per_s.items()}
        after_wall = after["step"] or 1.0
        trailing = {k: (int(v) if k in self.count_keys else round(v, 7)) for k, v in self.cur.items()}
        trailing["s"] = round(self.t_end - self.t_prev, 7)
        out = {
            "schema": SCHEMA,
            "shape": self.shape,
            "planted": self.planted,
            "argv": sys.argv,
            "pid": os.getpid(),
            "torch_version": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu_cores": usable_cores(),
            "python_version": sys.version.split()[0],
            "measurement": "time.perf_counter around the script's own code, no profiler; "
                           "rows cut right after optimizer.step() returns",
            "steps": len(rows),
            "loop_wall_s": self.t_end - self.t0,
            "steps_wall_s": totals["step"],
            "per_step_s": per_s,
            "per_step_n": per_n,
            "totals_s": totals,
            "shares": {k: v / steps_wall for k, v in totals.items() if k != "step"},
            "shares_after_first_step": {k: v / after_wall for k, v in after.items() if k != "step"},
            "trailing": trailing,
            "main_runqueue_share": ((self.runqueue1 - self.runqueue0) / (self.t_end - self.t0)
                                    if self.runqueue0 is not None and self.runqueue1 is not None
                                    and self.t_end > self.t0 else None),
        }
        out.update(extra or {})
        return out

    def write(self, path, extra=None):
        data = self.summary(extra)
        if path:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, path)
        return data


def plain_loop(clock, loader, model, loss_fn, opt, steps):
    """The plain supervised loop, timed by CLOCK: the next batch, forward and
    loss, backward, optimizer.step() (the row ends there), zero_grad()."""
    it = iter(loader)
    clock.start()
    for _ in range(steps):
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
    clock.stop()


def print_shares(gt, script_start):
    """The script's closing line: its steps and phase shares after the first step."""
    sh = gt["shares_after_first_step"]
    print(f"{gt['shape']}: {gt['steps']} steps; after the first step: "
          + ", ".join(f"{k} {100 * sh[k]:.1f} %" for k in ("data_wait", "forward", "backward", "optimizer"))
          + f"; script {time.perf_counter() - script_start:.2f} s", flush=True)


def mlp(width, layers):
    """`layers` equal nn.Linear(width, width) with ReLU between: no layer can
    dominate the model's time (heavy_layer needs one leaf >= 40 %)."""
    from torch import nn
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


class ReadBatches(torch.utils.data.Dataset):
    """Pre-batched regression data (DataLoader(batch_size=None)): item i is a
    whole batch (x, y) of in-memory tensors; each read sleeps `read_s` like a
    short I/O wait, so the data share is set by construction, not computed."""

    def __init__(self, n_batches, batch, width, read_s, seed=0):
        g = torch.Generator().manual_seed(seed)
        pool = max(1, min(n_batches, 16))
        self.x = torch.randn(pool, batch, width, generator=g)
        self.y = torch.randn(pool, batch, width, generator=g)
        self.n, self.read_s = n_batches, read_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.read_s > 0:
            time.sleep(self.read_s)
        k = i % len(self.x)
        return self.x[k], self.y[k]
