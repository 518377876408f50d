"""GPU planted case: a small CUDA model fed by a DataLoader with no
workers whose samples cost 2 ms each (a stand-in for decoding), batches of
16, 30 steps: the GPU idles most of each step. The script measures its own
data wait and step time (time.perf_counter, synchronising the GPU at each
step's end) and writes them to the JSON file given as its first argument."""
import json
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

out = sys.argv[1]
dev = "cuda"


class Slow(Dataset):
    def __len__(self):
        return 16 * 30

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(256), i % 10


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
loader = DataLoader(Slow(), batch_size=16, num_workers=0)
data, steps = [], []
t = time.perf_counter()
it = iter(loader)
while True:
    try:
        xb, yb = next(it)
    except StopIteration:
        break
    t_data = time.perf_counter()
    data.append(t_data - t)
    loss = nn.functional.cross_entropy(model(xb.to(dev)), yb.to(dev))
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    now = time.perf_counter()
    steps.append(now - t)
    t = now
with open(out, "w") as f:
    json.dump({"steps": len(steps), "step_s": steps, "data_s": data}, f)
