"""Installs its own profile function (sys.setprofile / threading.setprofile)
and prints what it counted, as JSON. Then runs a Python function a known
number of times after removing it.
Usage: coexist_setprofile.py main|thread|threading|profile"""

import json
import profile
import pstats
import sys
import threading

mode = sys.argv[1]
seen = {}
lock = threading.Lock()


def counter(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "target":
        with lock:
            name = threading.current_thread().name
            seen[name] = seen.get(name, 0) + 1


def target(i):
    return i * 2


def after_profiling():
    return sum(range(50))


def run_targets(n):
    return sum(target(i) for i in range(n))


if mode == "main":
    sys.setprofile(counter)
    run_targets(10)
    sys.setprofile(None)
elif mode == "thread":  # a thread sets and clears its own profile function
    def worker():
        sys.setprofile(counter)
        run_targets(6)
        sys.setprofile(None)
    threads = [threading.Thread(target=worker, name=f"w{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
elif mode == "profile":  # the pure-Python profiler: strict about the events it gets
    prof = profile.Profile()
    prof.runcall(run_targets, 10)
    stats = pstats.Stats(prof).stats
    seen = {name: nc for (file, _line, name), (_cc, nc, _tt, _ct, _callers) in stats.items()
            if file == __file__}
else:  # threading.setprofile: every thread started afterwards
    threading.setprofile(counter)
    threads = [threading.Thread(target=run_targets, args=(5,), name=f"t{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    threading.setprofile(None)

after = [after_profiling() for _ in range(7)]
print(json.dumps({"mode": mode, "seen": seen, "after_calls": len(after)}, sort_keys=True))
