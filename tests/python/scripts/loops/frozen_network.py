"""Loop shape: a network the loop does not train, run every iteration.

--shape loss_net (fast neural style's): a trained `transformer` and a frozen
`loss_net` (every parameter requires_grad=False). Each iteration runs the
loss network twice: under torch.no_grad() on the input (the target's
features) and with grad on the transformer's output (gradients flow through
it to the transformer, none reach its own parameters).

--shape teacher (knowledge distillation's): a `teacher` never frozen but
only ever called under torch.no_grad(), and a trained `student`.

The script never evaluates: its frozen network's calls are forward work of
every step, and torchneck must report no evaluation. Equal Linear layers
(no layer over 40 % of the model); a DataLoader (num_workers=0) whose reads
sleep a little.

    /usr/bin/python3 frozen_network.py [--shape loss_net|teacher] [--iters N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus:
  frozen_name        the frozen network's variable name
per_step_s: step, data_wait, forward (everything before backward: both
  networks and the loss), frozen (of forward, the frozen network's no-grad
  call), backward, optimizer (zero_grad and step).
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, ReadBatches, mlp, plain_loop, print_shares


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", choices=["loss_net", "teacher"], default="loss_net")
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--batch", type=int, default=96)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--read-ms", type=float, default=1.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    loss_fn = nn.MSELoss()
    loader = DataLoader(ReadBatches(a.iters, a.batch, a.width, a.read_ms / 1000, a.seed),
                        batch_size=None, num_workers=0)
    clock = LoopClock("frozen_network_" + a.shape, f"a {a.shape} the loop does not train, called every iteration")
    if a.shape == "loss_net":
        transformer, loss_net = mlp(a.width, 2), mlp(a.width, 4)
        loss_net.requires_grad_(False)
        opt = torch.optim.Adam(transformer.parameters(), lr=1e-3)

        def forward(x, y):
            out = transformer(x)
            with clock.timed("frozen"), torch.no_grad():
                target = loss_net(y)
            return loss_fn(loss_net(out), target)
        frozen_name = "loss_net"
    else:
        teacher, student = mlp(a.width, 6), mlp(a.width, 2)
        teacher.eval()
        opt = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9)

        def forward(x, y):
            with clock.timed("frozen"), torch.no_grad():
                soft = teacher(x)
            out = student(x)
            return loss_fn(out, soft) + loss_fn(out, y)
        frozen_name = "teacher"

    # The plain loop, its loss function the whole forward: both networks and the loss.
    plain_loop(clock, loader, lambda x: x, forward, opt, a.iters)
    gt = clock.write(a.truth, {"frozen_name": frozen_name})
    print_shares(gt, _T0)


if __name__ == "__main__":
    main()
