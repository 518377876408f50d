"""Backward attribution: `big` does 20x the multiply-adds of each small
layer, in forward and so in backward; the script times each layer's
backward itself (tensor hooks: from the gradient of its output to that of
its input, or of its last parameter where its input needs none).

    /usr/bin/python3 backward_truth.py [--truth PATH]

--truth PATH writes {"backward_ms": {layer: its backward as timed here}}.
"""
import argparse
import json
import time

import torch
from torch import nn

torch.manual_seed(0)


class Big(nn.Module):
    """128 -> 2560 -> sum of 20 chunks of 128: 20x a Linear(128, 128)."""

    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(128, 128 * 20)

    def forward(self, x):
        return self.wide(x).view(x.shape[0], 20, 128).sum(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.small1 = nn.Linear(128, 128)
        self.big = Big()
        self.small2 = nn.Linear(128, 128)

    def forward(self, x):
        return self.small2(torch.relu(self.big(torch.relu(self.small1(x)))))


class BackwardClock:
    """Each layer's backward, summed over the run: a hook on its output's
    gradient starts it, the last of its input's and parameters' gradients
    ends it (the parameters' hooks are registered once: they are the same
    tensors every step)."""

    def __init__(self, layers):
        self.ms = {name: 0.0 for name in layers}
        for name, layer in layers.items():
            state = {"started": 0.0, "left": 0}
            end = self.end_hook(name, state)
            for param in layer.parameters():
                param.register_hook(end)
            layer.register_forward_hook(self.forward_hook(layer, state, end))

    def end_hook(self, name, state):
        def end(grad):
            state["left"] -= 1
            if state["left"] == 0:
                self.ms[name] += 1000 * (time.perf_counter() - state["started"])
        return end

    @staticmethod
    def forward_hook(layer, state, end):
        def hook(module, inputs, output):
            graded = [t for t in inputs if t.requires_grad]
            state["left"] = len(graded) + sum(1 for q in layer.parameters() if q.requires_grad)
            output.register_hook(lambda grad: state.update(started=time.perf_counter()))
            for t in graded:
                t.register_hook(end)
        return hook


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    model = Net()
    clock = BackwardClock({"small1": model.small1, "big": model.big, "small2": model.small2})
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 128)
    for _ in range(20):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    if a.truth:
        with open(a.truth, "w") as f:
            json.dump({"backward_ms": clock.ms}, f)


if __name__ == "__main__":
    main()
