"""A manual SGD loop: no optimizer, no DataLoader, parameters updated by
hand under no_grad. Prints the number of iterations it ran."""

import sys

import torch

torch.manual_seed(0)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 15
w = torch.randn(64, 64, requires_grad=True)
b = torch.zeros(64, requires_grad=True)
x = torch.randn(128, 64)
y = torch.randn(128, 64)
for it in range(iters):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        b -= 0.01 * b.grad
        w.grad.zero_()
        b.grad.zero_()
print("iterations", iters)
