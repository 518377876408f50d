"""Threads that run torch operators and Python code, one still running
(daemon) when the script ends, and none of the tools the coexistence guard
watches; prints the results, as JSON."""

import json
import queue
import threading
import time

import torch

results = queue.Queue()


def worker(i):
    x = torch.full((8, 8), float(i))
    total = 0
    for _ in range(5):
        total += float((x @ x).sum())
    results.put((i, total, threading.current_thread().name))


def forever():
    while True:
        time.sleep(0.05)


threading.Thread(target=forever, name="daemon", daemon=True).start()
threads = [threading.Thread(target=worker, args=(i,), name=f"worker-{i}") for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
got = sorted(results.get() for _ in threads)
print(json.dumps({"results": got, "alive": sorted(t.name for t in threading.enumerate())}))
