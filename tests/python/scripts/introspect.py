"""Prints what a script sees of its own invocation, as JSON, and creates two
DataLoaders so the report can be checked against their real settings."""

import json
import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

ds = TensorDataset(torch.arange(64.0).reshape(32, 2))
a = DataLoader(ds, batch_size=4)
b = DataLoader(ds, batch_size=8, num_workers=2, pin_memory=False, persistent_workers=True,
               prefetch_factor=3)
torch.set_num_threads(1)
print(json.dumps({
    "name": __name__,
    "argv": sys.argv,
    "path0": sys.path[0],
    "file": os.path.abspath(__file__),
    "main_is_me": sys.modules["__main__"].__dict__ is globals(),
    "loaders": [[l.num_workers, l.batch_size, l.persistent_workers] for l in (a, b)],
    "affinity": len(os.sched_getaffinity(0)),
    "threads": torch.get_num_threads(),
}))
