"""A tiny CPU training loop that lasts about a second: the run the NVML
tests sample (the GPUs are the stand-in library's, scripted by the test)."""

import time

import torch

model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 16)
for _ in range(50):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    time.sleep(0.02)
