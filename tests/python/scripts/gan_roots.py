"""Two root models of the same class, as a GAN holds them: a generator and a
discriminator, both nn.Sequential, each with its own optimizer, updated in
turn every iteration (discriminator, then generator). The trainer object
holds the generator as `self.netG` and calls it from its method; the
discriminator is a local, `netD`, of the function that calls it.

    /usr/bin/python3 gan_roots.py [--iters N] [--truth PATH]

--truth PATH writes {"holders": {"netG": [...], "netD": [...]}}: for each
root, the names its named_modules() gives its submodules, which a layer
under that root is named after ("netG.0"); and "modules_without_children":
the classes of the other modules it calls (the loss), named by their class.
"""
import argparse
import json

import torch
from torch import nn


class Trainer:
    def __init__(self, netG, width):
        self.netG = netG
        self.width = width

    def fake(self, batch):
        return self.netG(torch.randn(batch, self.width))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(0)
    netG = nn.Sequential(nn.Linear(a.width, 128), nn.ReLU(), nn.Linear(128, a.width))
    netD = nn.Sequential(nn.Linear(a.width, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    trainer = Trainer(netG, a.width)
    opt_g = torch.optim.Adam(netG.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(netD.parameters(), lr=1e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(a.batch, 1), torch.zeros(a.batch, 1)
    for it in range(a.iters):
        real = torch.randn(a.batch, a.width) + 1.0
        opt_d.zero_grad()
        fake = trainer.fake(a.batch)
        loss_d = loss_fn(netD(real), ones) + loss_fn(netD(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = loss_fn(netD(fake), ones)
        loss_g.backward()
        opt_g.step()
        if it % 10 == 0:
            print(f"iter {it:3d}  loss_d {loss_d.item():.3f}  loss_g {loss_g.item():.3f}", flush=True)
    if a.truth:
        holders = {name: [n for n, _ in model.named_modules() if n] for name, model in (("netG", netG), ("netD", netD))}
        with open(a.truth, "w") as f:
            json.dump({"holders": holders, "modules_without_children": [type(loss_fn).__name__]}, f)


if __name__ == "__main__":
    main()
