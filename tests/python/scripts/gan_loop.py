"""A GAN-style loop: two models, two optimizers, each stepped once per
iteration, no DataLoader. Prints the number of iterations it ran."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 12
G = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
D = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for it in range(iters):
    real = torch.randn(32, 8)
    fake = G(torch.randn(32, 16))
    opt_d.zero_grad()
    loss_d = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    loss_d.backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = bce(D(fake), torch.ones(32, 1))
    loss_g.backward()
    opt_g.step()
print("iterations", iters)
