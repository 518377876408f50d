"""Loop shape: several optimizers whose steps do not come one per iteration.

--shape layers (a forward-forward trainer's): the whole dataset read once
from a DataLoader, one Adam per layer; the first layer is trained for
--iters updates, then the second on the first's detached output for
--iters more. Every update is an iteration of the loop: 2 x --iters
steps, where "every 2nd optimizer.step ends a step" would count half, and
"the steps between two fetches" all of them as one.

--shape gan (a WGAN's): a DataLoader of --iters batches; each batch a
critic update, and every 2nd batch a generator update after it (1.5
optimizer steps a batch, two Adams). Every batch is an iteration: --iters
steps.

    /usr/bin/python3 optimizers_in_turn.py [--shape layers|gan] [--iters N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  optimizer_steps    optimizer.step() calls in all
per_step_s: step, data_wait, forward, backward, optimizer.
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from looptruth import LoopClock, ReadBatches, mlp, print_shares


def update(clock, model, opt, x, target):
    with clock.timed("forward"):
        loss = nn.functional.mse_loss(model(x), target)
    with clock.timed("backward"):
        loss.backward()
    with clock.timed("optimizer"):
        opt.step()
        opt.zero_grad()


def layers(a, clock):
    """Each layer trained in turn by its own optimizer: every update a step."""
    first, second = mlp(a.width, 4), mlp(a.width, 4)
    opts = [torch.optim.Adam(first.parameters(), lr=1e-3), torch.optim.Adam(second.parameters(), lr=1e-3)]
    # The whole dataset in one batch, read once from its DataLoader.
    data = TensorDataset(torch.randn(a.batch, a.width), torch.randn(a.batch, a.width))
    x, y = next(iter(DataLoader(data, batch_size=a.batch)))
    clock.start()
    for _ in range(a.iters):
        update(clock, first, opts[0], x, y)
        clock.boundary()
    h = first(x).detach()
    for _ in range(a.iters):
        update(clock, second, opts[1], h, y)
        clock.boundary()
    clock.stop()
    return 2 * a.iters


def gan(a, clock):
    """A critic update every batch, a generator update every 2nd: a step a batch."""
    critic, generator = mlp(a.width, 4), mlp(a.width, 4)
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4)
    loader = DataLoader(ReadBatches(a.iters, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)
    it = iter(loader)
    steps = 0
    clock.start()
    for i in range(a.iters):
        real, noise = clock.next(it)
        with clock.timed("forward"):
            fake = generator(noise).detach()
            loss = critic(fake).mean() - critic(real).mean()
        with clock.timed("backward"):
            loss.backward()
        with clock.timed("optimizer"):
            opt_c.step()
            opt_c.zero_grad()
        steps += 1
        if i % 2 == 1:
            with clock.timed("forward"):
                loss = -critic(generator(noise)).mean()
            with clock.timed("backward"):
                loss.backward()
            with clock.timed("optimizer"):
                opt_g.step()
                opt_g.zero_grad()
                opt_c.zero_grad()
            steps += 1
        clock.boundary()
    clock.stop()
    return steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", choices=["layers", "gan"], default="layers")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--batch", type=int, default=96)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=1.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    clock = LoopClock("optimizers_in_turn_" + a.shape, f"two optimizers, {a.shape}: not one step each per iteration")
    optimizer_steps = layers(a, clock) if a.shape == "layers" else gan(a, clock)
    gt = clock.write(a.truth, {"optimizer_steps": optimizer_steps})
    print_shares(gt, _T0)


if __name__ == "__main__":
    main()
