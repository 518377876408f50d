"""Backward attribution with a truth known by construction: `big` does 20x
the multiply-adds of each small layer, in forward and so in backward."""

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


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 128)
for _ in range(20):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
