"""A GPT-style model laid out as nanoGPT and minGPT lay theirs out: the blocks
in an nn.ModuleList inside an nn.ModuleDict (`transformer.h.0`,
`transformer.wte`, `transformer.ln_f`), neither container ever called, and
an lm_head beside them. Trains a few steps on random tokens.

    /usr/bin/python3 gpt_layout.py [--steps N] [--truth PATH]

--truth PATH writes {"root": the model's class name, "named_modules": the
names model.named_modules() gives, "containers": those of the ModuleDict
and ModuleList (never called)}.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, context, width, layers, heads):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width),
        ))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), 1))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x, self.mask[:t, :t])
        return self.lm_head(self.transformer.ln_f(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(0)
    vocab, context = 65, 32
    model = GPT(vocab, context, width=64, layers=3, heads=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, vocab, (4096,))
    for step in range(a.steps):
        starts = torch.randint(0, len(data) - context - 1, (16,))
        x = torch.stack([data[s:s + context] for s in starts])
        y = torch.stack([data[s + 1:s + 1 + context] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if a.truth:
        containers = [n for n, m in model.named_modules() if isinstance(m, (nn.ModuleDict, nn.ModuleList))]
        with open(a.truth, "w") as f:
            json.dump({"root": type(model).__name__, "containers": containers,
                       "named_modules": [n for n, _ in model.named_modules() if n]}, f)


if __name__ == "__main__":
    main()
