"""A DataLoader with worker processes and a planted slow transform
(slow_transform: pure Python, a fixed amount of work per sample). The worker
measures itself with perf_counter: the span from the start of a batch's first
__getitem__ to the end of its collate (so the gaps between items, whatever
they cost, are inside it), and appends "pid seconds" per batch to the file
named by --truth after the timed span, through one descriptor kept open: the
workers' own self-measurement, which the profile's per-worker numbers are
checked against. Prints the loss of every step (the training must be the same
with and without the profiler).

    python workers_slow_transform.py --start-method fork|spawn|forkserver --truth PATH
        [--workers 2] [--items 48] [--batch 4] [--work 100000] [--persistent]
        [--as-default]

--as-default sets the start method as the process-wide default
(multiprocessing.set_start_method) and gives the DataLoader no context.
"""
import argparse
import multiprocessing
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

_batch_start = [None]  # perf_counter at the first __getitem__ of the batch being produced
_truth_fd = [None, None]  # (pid, fd): a fork child opens its own


def slow_transform(i, work):
    acc = 0.0
    for k in range(work):
        acc += ((i * 31 + k) % 97) * 0.5
    return acc


class Planted(Dataset):
    def __init__(self, items, work, truth):
        self.items, self.work, self.truth = items, work, truth

    def __len__(self):
        return self.items

    def __getitem__(self, i):
        if _batch_start[0] is None:
            _batch_start[0] = time.perf_counter()
        v = slow_transform(i, self.work)
        x = torch.full((16,), v / (self.work * 50.0)) + torch.randn(16) * 0.01
        y = torch.tensor(float(i % 3))
        return x, y


class TimedCollate:
    def __init__(self, truth):
        self.truth = truth

    def __call__(self, batch):
        out = default_collate(batch)
        produced = time.perf_counter() - _batch_start[0]
        _batch_start[0] = None
        if _truth_fd[0] != os.getpid():
            _truth_fd[:] = [os.getpid(), os.open(self.truth, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)]
        os.write(_truth_fd[1], f"{os.getpid()} {produced:.9f}\n".encode())
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--start-method", default="fork")
    ap.add_argument("--truth", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--items", type=int, default=48)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--work", type=int, default=100000)
    ap.add_argument("--persistent", action="store_true", help="persistent_workers=True: alive after the loop")
    ap.add_argument("--segv-at-end", action="store_true", help="die by SIGSEGV after the loop")
    ap.add_argument("--as-default", action="store_true",
                    help="multiprocessing.set_start_method(METHOD), DataLoader without a context")
    a = ap.parse_args()
    context = a.start_method
    if a.as_default:
        multiprocessing.set_start_method(a.start_method)
        context = None
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Planted(a.items, a.work, a.truth), batch_size=a.batch, shuffle=True,
                        num_workers=a.workers, multiprocessing_context=context,
                        collate_fn=TimedCollate(a.truth), persistent_workers=a.persistent,
                        generator=torch.Generator().manual_seed(1))
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}", flush=True)
    if a.segv_at_end:
        import ctypes

        del loader  # non-persistent workers have exited already
        ctypes.string_at(0)


if __name__ == "__main__":
    main()
