"""Loop shape: few operators that each call many others.

The model scores 256 small sequences against themselves with torch.bmm
(batches of 16 x 16 matrices): on a CPU build that splits a batched
product per matrix, each aten::bmm calls aten::select (and what select
calls) for every matrix, forward and backward, thousands of nested operator
calls a step. The script itself calls a few dozen operators a step: it is
not made of tiny operators, and torch.bmm is already the batched form.
torchneck must not report framework_overhead ("many small operators per
step") for it.

    /usr/bin/python3 nested_bmm.py [--steps N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py).
per_step_s: step, data_wait, forward, backward, optimizer.
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from looptruth import LoopClock, plain_loop, print_shares


class PairScores(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.out = nn.Linear(width, 1)

    def forward(self, x):  # x: (batch, tokens, width)
        scores = torch.bmm(self.q(x), self.k(x).transpose(1, 2)).softmax(-1)
        return self.out(torch.bmm(scores, x)).mean(dim=(1, 2))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    # Whole batches read as they are: the data side is no work of its own
    # (sample by sample, collating 256 of them was 15 % of a step beside
    # busy loops), so the compute is the shape's only question.
    batches = [(torch.randn(a.batch, a.tokens, a.width), torch.randn(a.batch)) for _ in range(a.steps)]
    loader = DataLoader(batches, batch_size=None, num_workers=0)
    model = PairScores(a.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()

    clock = LoopClock("nested_bmm", "few operators a step, each bmm calling one select per matrix")
    plain_loop(clock, loader, model, loss_fn, opt, a.steps)
    gt = clock.write(a.truth, {"matrices_per_bmm": a.batch})
    print_shares(gt, _T0)


if __name__ == "__main__":
    main()
