"""Profiles part of itself with cProfile and prints cProfile's counts for its
own functions, as JSON. Then runs a Python function a known number of times
after its profiler was disabled.
Usage: coexist_cprofile.py enable|context|runcall|thread"""

import cProfile
import json
import pstats
import sys
import threading

mode = sys.argv[1]


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work():
    return [fib(8) for _ in range(3)]


def after_profiling():
    return sum(range(50))


profiler = cProfile.Profile()
if mode == "enable":
    profiler.enable()
    work()
    profiler.disable()
elif mode == "context":
    with profiler:
        work()
elif mode == "runcall":
    profiler.runcall(work)
else:  # the script's profiler runs on a thread of its own
    def in_thread():
        profiler.enable()
        work()
        profiler.disable()
    t = threading.Thread(target=in_thread, name="profiled")
    t.start()
    t.join()

stats = pstats.Stats(profiler).stats
mine = {name: (cc, nc) for (file, _line, name), (cc, nc, _tt, _ct, _callers) in stats.items()
        if file == __file__}
after = [after_profiling() for _ in range(7)]
print(json.dumps({"mode": mode, "calls": mine, "after_calls": len(after)}, sort_keys=True))
