"""Run a script under torch.autograd.profiler.profile(), as a user would.

    /usr/bin/python3 benchmarks/autograd_profile.py SCRIPT [ARGS...]

The script runs as __main__ (runpy.run_path, run_name="__main__") with
sys.argv set to [SCRIPT, ARGS...] and its folder first on sys.path, like
`python SCRIPT ARGS`. Afterwards the usual summary is built and printed
(key_averages().table, top 15 by self CPU time), because that aggregation is
part of what using the autograd profiler costs. The anchor
`torch.autograd.profiler` of the overhead benchmark (benchmarks/overhead).
"""
import os
import runpy
import sys
import time


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: autograd_profile.py SCRIPT [ARGS...]")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))

    import torch

    with torch.autograd.profiler.profile() as prof:
        runpy.run_path(script, run_name="__main__")
    t0 = time.perf_counter()
    table = prof.key_averages().table(sort_by="self_cpu_time_total",
                                      row_limit=15)
    print(table)
    print(f"autograd_profile: {len(prof.function_events)} events, summary "
          f"built in {time.perf_counter() - t0:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
