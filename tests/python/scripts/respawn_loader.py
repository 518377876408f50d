"""A DataLoader whose workers are started again every epoch
(persistent_workers=False, the default), or kept (--persistent). Measures
its own ground truth: how long the loop waited between the last batch of
one epoch and the first of the next (the StopIteration that shuts the
workers down, the new iterator that starts them, its first batch), beside
the waits for the other batches, the loop's whole time, when its first
next() began and when its last optimizer step ended (the span the
profile's steps cover: the first iter() comes before it, the last epoch's
shutdown after).

    respawn_loader.py TRUTH.json [--persistent] [--epochs N]
"""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main():
    truth_path = sys.argv[1]
    persistent = "--persistent" in sys.argv
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 4
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(96, 32), torch.randn(96))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=persistent)
    between_epochs, other_waits = [], []
    t0 = time.perf_counter()
    ended = None  # when the last epoch's StopIteration began
    first_start = last_step_end = 0.0
    first_next = None
    for _ in range(epochs):
        it = iter(loader) if ended is None else None
        first = True
        while True:
            w0 = time.perf_counter()
            if first_next is None:
                first_next = w0 - t0  # where the profile's step 0 starts (its first fetch)
            if it is None:  # the new epoch's iterator starts inside the wait being measured
                it = iter(loader)
            try:
                x, y = next(it)
            except StopIteration:
                ended = w0
                break
            if first and ended is not None:
                between_epochs.append(time.perf_counter() - ended)
            elif first:  # the very first batch: the one start any DataLoader pays
                first_start = time.perf_counter() - t0
            else:
                other_waits.append(time.perf_counter() - w0)
            first = False
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            last_step_end = time.perf_counter() - t0  # where the profile's last step ends
    loop_s = time.perf_counter() - t0
    with open(truth_path, "w") as f:
        json.dump({"epochs": epochs, "between_epochs_s": between_epochs, "other_waits_s": other_waits,
                   "first_start_s": first_start, "first_next_s": first_next, "last_step_end_s": last_step_end, "loop_s": loop_s}, f)


if __name__ == "__main__":
    main()
