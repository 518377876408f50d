"""A training loop that makes many reference cycles each step: every step
builds a graph of 40,000 small objects that point back at their parent
(parent <-> child cycles) and drops it at the end, so Python's cyclic
garbage collector runs again and again, and its full collections walk the
objects alive since setup (a large list of records, as a dataset index
would be). With --clean the step builds the same number of numbers in one
list: nothing for the collector to do.

Ground truth, taken by the script itself without gc.callbacks: gc.get_stats()
at its start and end (collections per generation), the time of its loop,
and the instants around one explicit full collection in step MARKED_STEP
(time.perf_counter_ns: CLOCK_MONOTONIC, the profiler's clock), written as
JSON to the file given as its first argument."""
import gc
import json
import sys
import time

import torch

STEPS = 30
MARKED_STEP = 3
marked = []
out_path = sys.argv[1]
clean = "--clean" in sys.argv[2:]
stats0 = gc.get_stats()
torch.manual_seed(0)

index = [{"id": i, "tags": [i]} for i in range(200_000)]  # long-lived: full collections walk it


class Node:
    def __init__(self, parent):
        self.parent = parent
        self.children = []
        if parent is not None:
            parent.children.append(self)


def make_garbage():
    if clean:
        return [i * 2 for i in range(40_000)]
    root = Node(None)
    for i in range(40_000):
        Node(root if i % 100 == 0 else root.children[-1])
    return root


model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
t0 = time.perf_counter()
for step in range(STEPS):
    junk = make_garbage()
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    if step == MARKED_STEP and not clean:
        marked = [time.perf_counter_ns()]
        gc.collect()
        marked.append(time.perf_counter_ns())
    opt.step()
    del junk
loop_s = time.perf_counter() - t0
stats1 = gc.get_stats()
with open(out_path, "w") as f:
    json.dump({"collections": [b["collections"] - a["collections"] for a, b in zip(stats0, stats1)],
               "loop_s": loop_s, "clean": clean, "index": len(index), "marked_step": MARKED_STEP,
               "marked_ns": marked}, f)
