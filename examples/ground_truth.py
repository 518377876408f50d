"""The ground truth every example measures about itself, without any
profiler: five time.perf_counter reads per step (data wait, forward,
backward, optimizer; the rest is "other"), and getrusage over the loop.
`--ground-truth PATH` writes StepClock.summary() as JSON; the tests and
benchmarks/accuracy compare torchneck's profile with it."""
import os
import resource
import statistics
import sys
import time

import torch


class StepClock:
    """Five perf_counter reads per step; phases are differences of them."""

    PHASES = ("data_wait", "forward", "backward", "optimizer", "other")

    def __init__(self, example, planted, script_t0):
        self.example, self.planted, self.script_t0 = example, planted, script_t0
        self.rows = []  # (step, data_wait, forward, backward, optimizer)
        self.loop_t0 = self.loop_t1 = 0.0
        self.ru0 = self.ru1 = None

    def start(self):
        self.ru0 = resource.getrusage(resource.RUSAGE_SELF)
        self.loop_t0 = time.perf_counter()
        return self.loop_t0

    def stop(self):
        self.loop_t1 = time.perf_counter()
        self.ru1 = resource.getrusage(resource.RUSAGE_SELF)

    def summary(self, args, extra=None):
        rows = self.rows
        per = {name: [r[i] for r in rows] for i, name in
               enumerate(("step",) + self.PHASES[:4])}
        per["other"] = [r[0] - sum(r[1:]) for r in rows]

        def shares(sel):
            tot = {k: sum(per[k][i] for i in sel) for k in per}
            step = tot["step"] or 1.0
            return ({k: tot[k] for k in per},
                    {k: tot[k] / step for k in self.PHASES})

        totals, share = shares(range(len(rows)))
        _, steady = shares(range(1, len(rows)))
        out = {
            "schema": "torchneck-ground-truth/1",
            "example": self.example,
            "planted": self.planted,
            "argv": sys.argv,
            "pid": os.getpid(),
            "seed": args.seed,
            "steps": len(rows),
            "batch_size": args.batch_size,
            "num_workers": args.num_workers,
            "torch_version": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "python_version": sys.version.split()[0],
            "measurement": "time.perf_counter, 5 reads per step, no profiler",
            "setup_s": self.loop_t0 - self.script_t0,
            "loop_wall_s": self.loop_t1 - self.loop_t0,
            "script_wall_s": self.loop_t1 - self.script_t0,
            "totals_s": totals,
            "shares": share,
            "shares_after_first_step": steady,
            "step_median_s": statistics.median(per["step"]) if rows else 0.0,
            "step_mean_s": statistics.fmean(per["step"]) if rows else 0.0,
            "loop_rusage": {
                "user_s": self.ru1.ru_utime - self.ru0.ru_utime,
                "sys_s": self.ru1.ru_stime - self.ru0.ru_stime,
                "minor_faults": self.ru1.ru_minflt - self.ru0.ru_minflt,
                "major_faults": self.ru1.ru_majflt - self.ru0.ru_majflt,
                # the process's peak resident memory so far (kB on Linux)
                "peak_rss_mb": self.ru1.ru_maxrss / 1024,
                "note": "getrusage(RUSAGE_SELF) over the loop: all threads "
                        "of the process, a profiler's own included; "
                        "peak_rss_mb: the process's peak at the loop's end",
            },
            "per_step_s": {k: [round(v, 7) for v in per[k]] for k in per},
        }
        out.update(extra or {})
        return out
