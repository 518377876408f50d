"""Two DataLoaders whose workers never live at the same time: a training
loader (2 workers, a pure-Python transform that keeps them busy) for
--steps steps, its iterator then closed, and an evaluation loader (2 more
workers) made after it, for a few batches under no_grad. The main thread
computes all the while (matmuls, 1 torch thread), so on 2 cores the busy
workers make it wait for a CPU: core_contention, whose advice must count the
2 workers alive at once, not the 4 of the run.

--truth PATH writes the script's own record, by time.monotonic (the
profile's clock): each loader's iterator's lifetime, [made, closed], and its
worker count, {"loaders": [{"name", "workers", "start_s", "end_s"}],
"steps"}; the workers of a loader live within its iterator's lifetime.

    python two_loaders.py [--steps 40] [--work 6000] [--truth PATH]
"""
import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


def busy(i, work):
    acc = 0.0
    for k in range(work):
        acc += ((i * 31 + k) % 97) * 0.5
    return acc


class Busy(Dataset):
    def __init__(self, items, work):
        self.items, self.work = items, work

    def __len__(self):
        return self.items

    def __getitem__(self, i):
        v = busy(i, self.work)
        return torch.full((256,), v / (self.work * 50.0)), torch.tensor(float(i % 3))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--work", type=int, default=6000)
    p.add_argument("--eval-batches", type=int, default=6)
    p.add_argument("--truth")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loaders = []

    def timed_loader(name, items):
        loader = DataLoader(Busy(items, a.work), batch_size=a.batch, num_workers=2)
        record = {"name": name, "workers": 2, "start_s": time.monotonic()}
        loaders.append(record)
        return iter(loader), record

    it, record = timed_loader("train", a.steps * a.batch)
    steps = 0
    for x, y in it:
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    del it  # the iterator ends its workers
    record["end_s"] = time.monotonic()
    model.eval()
    it, record = timed_loader("eval", a.eval_batches * a.batch)
    with torch.no_grad():
        total = sum(float(model(x).sum()) for x, _ in it)
    del it
    record["end_s"] = time.monotonic()
    print(f"steps {steps}, eval sum {total:.3f}")
    if a.truth:
        with open(a.truth, "w") as f:
            json.dump({"loaders": loaders, "steps": steps}, f)


if __name__ == "__main__":
    main()
