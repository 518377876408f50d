"""A model whose one heavy layer is of a chosen kind, trained on random data
in memory (no loader: the model is the step):

    hidden: Linear(64, 2048) in the middle of an MLP
    output: the output layer, Linear(64, 8192) (8192 outputs the task sets)
    vocab:  the output layer onto a vocabulary, Linear(64, 8192), beside the
            Embedding(8192, 64) that holds it
    lstm:   a two-layer LSTM(32, 256) before a small head

    /usr/bin/python3 heavy_layer_kinds.py KIND [--steps N] [--truth PATH]

--truth PATH writes {"heavy": the heavy layer's name, "config": its
extra_repr(), "output_layer": the name of the model's last layer}.
"""
import argparse
import json

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.inp = nn.Linear(64, 64)
        self.mid = nn.Linear(64, 2048) if kind == "hidden" else nn.Linear(64, 64)
        self.out = nn.Linear(2048, 10) if kind == "hidden" else nn.Linear(64, 8192)

    def forward(self, x):
        return self.out(torch.relu(self.mid(torch.relu(self.inp(x)))))


class TinyLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(8192, 64)
        self.mix = nn.Linear(64, 64)
        self.lm_head = nn.Linear(64, 8192, bias=False)

    def forward(self, idx):
        return self.lm_head(torch.relu(self.mix(self.wte(idx))))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 32)
        self.rnn = nn.LSTM(32, 256, num_layers=2, batch_first=True)
        self.head = nn.Linear(256, 4)

    def forward(self, x):
        return self.head(self.rnn(self.proj(x))[0][:, -1])


def batch(kind, g):
    if kind == "vocab":
        idx = torch.randint(0, 8192, (8, 32), generator=g)
        return idx, torch.randint(0, 8192, (8, 32), generator=g)
    if kind == "lstm":
        return torch.randn(16, 24, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
    return torch.randn(256, 64, generator=g), None


def loss_of(kind, model, x, y):
    out = model(x)
    if kind == "vocab":
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    if kind == "lstm":
        return nn.functional.cross_entropy(out, y)
    return out.square().mean()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["hidden", "output", "vocab", "lstm"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = {"vocab": TinyLm, "lstm": Recurrent}.get(a.kind, lambda: Mlp(a.kind))()
    heavy = {"hidden": "mid", "output": "out", "vocab": "lm_head", "lstm": "rnn"}[a.kind]
    last = {"vocab": "lm_head", "lstm": "head"}.get(a.kind, "out")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(a.steps):
        x, y = batch(a.kind, g)
        opt.zero_grad()
        loss_of(a.kind, model, x, y).backward()
        opt.step()
    if a.truth:
        with open(a.truth, "w") as f:
            json.dump({"heavy": heavy, "config": getattr(model, heavy).extra_repr(), "output_layer": last}, f)


if __name__ == "__main__":
    main()
