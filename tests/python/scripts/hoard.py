"""A loop that keeps something every step: with --tensors a 4 MiB tensor
appended to a list (a cache of outputs), with --objects a 4 MiB bytearray
(Python objects, no tensor). Each step also makes and drops a few tensors,
as a training step does.

The script records, at the end of every step, the bytes of the tensors it
holds (their storages' sizes) and writes them to the JSON file given as its
first argument: the test's ground truth for torch's CPU allocator figure,
taken in the same run. Each step sleeps 50 ms so that the 100 ms memory
sampler sees ~20 samples."""
import json
import sys
import time

import torch

STEPS = 40
N = 1 << 20  # 4 MiB of float32
out_path, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


def nbytes(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.nbytes()


w = torch.nn.Parameter(torch.ones(N))
opt = torch.optim.SGD([w], lr=1e-4)
kept = []
held = []
for step in range(STEPS):
    time.sleep(0.05)
    x = torch.randn(N)
    loss = (torch.tanh(x * w) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if mode == "--tensors":
        kept.append(torch.tanh(x.detach()))
    else:
        kept.append(bytearray(b"x") * (4 * N))
    tensors = [w, w.grad, x] + [k for k in kept if isinstance(k, torch.Tensor)]
    held.append(sum(nbytes(t) for t in tensors))
with open(out_path, "w") as f:
    json.dump({"held_tensor_bytes": held, "steps": STEPS}, f)
