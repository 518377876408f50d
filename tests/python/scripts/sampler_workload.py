"""A planted workload for the Python sampler that measures its own ground truth.

Usage: sampler_workload.py TRUTH_JSON [--busy S] [--sleep S] [--thread S]
                                       [--bursts S] [--burst-ms MS]

Four phases, each in a function with a name no other code uses, so the
profile's row for it is unambiguous:

  busy_python_loop        pure-Python arithmetic on the main thread
  sleeping_in_time_sleep  time.sleep on the main thread (blocked in C, GIL released)
  thread_busy_worker      pure-Python arithmetic on a thread started mid-run,
                          i.e. after the profiler (and its sampler) started
  gil_release_caller      calls short_python_burst (pure Python, ~1 ms, far
                          below the 5 ms switch interval) then a call that
                          releases the GIL (select with no timeout), again and
                          again: the pattern of a data pipeline's Python
                          transforms between torch ops. A sampler that waits
                          for the GIL to be released would see every burst at
                          the releasing call, i.e. charge it all to
                          gil_release_caller; the truth is that nearly all of
                          it is short_python_burst's own time.

Each phase is timed here with time.perf_counter (the profiler's own clock,
CLOCK_MONOTONIC), without any help from the profiler, and the seconds are
written to TRUTH_JSON. The phases do not overlap, so wall time measured in the
script equals the time a wall-clock sampler should attribute to each function
as self time.
"""

import argparse
import json
import select
import threading
import time


def busy_python_loop(seconds):
    start = time.perf_counter()
    end = start + seconds
    x = 0
    while time.perf_counter() < end:
        for i in range(2000):
            x += i * i
    return time.perf_counter() - start, x


def sleeping_in_time_sleep(seconds):
    start = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - start


def thread_busy_worker(seconds, result):
    start = time.perf_counter()
    end = start + seconds
    x = 0
    while time.perf_counter() < end:
        for i in range(2000):
            x += i * i
    result["seconds"] = time.perf_counter() - start
    result["native_id"] = threading.get_native_id()


def short_python_burst(seconds):
    start = time.perf_counter()
    end = start + seconds
    x = 0
    while time.perf_counter() < end:
        for i in range(50):
            x += i * i
    return time.perf_counter() - start


def gil_release_caller(seconds, burst_s):
    start = time.perf_counter()
    end = start + seconds
    in_bursts = 0.0
    while time.perf_counter() < end:
        in_bursts += short_python_burst(burst_s)
        select.select([], [], [], 0)  # releases the GIL
    return time.perf_counter() - start, in_bursts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("truth_json")
    parser.add_argument("--busy", type=float, default=0.6)
    parser.add_argument("--sleep", type=float, default=0.3)
    parser.add_argument("--thread", type=float, default=0.4)
    parser.add_argument("--bursts", type=float, default=0.6)
    parser.add_argument("--burst-ms", type=float, default=1.0)
    args = parser.parse_args()

    busy_s, _ = busy_python_loop(args.busy)
    sleep_s = sleeping_in_time_sleep(args.sleep)

    result = {}
    worker = threading.Thread(
        target=thread_busy_worker, args=(args.thread, result), name="planted-worker"
    )
    worker.start()
    worker.join()

    bursts_s, in_bursts_s = gil_release_caller(args.bursts, args.burst_ms / 1000.0)

    truth = {
        "busy_python_loop": busy_s,
        "sleeping_in_time_sleep": sleep_s,
        "thread_busy_worker": result["seconds"],
        "thread_native_id": result["native_id"],
        # self times: the bursts as timed inside them; the caller keeps the rest
        "short_python_burst": in_bursts_s,
        "gil_release_caller": bursts_s - in_bursts_s,
    }
    with open(args.truth_json, "w") as f:
        json.dump(truth, f, indent=2)


if __name__ == "__main__":
    main()
