"""Loop shape: preprocessing written as nn.Modules, in a single-process loader.

torchvision's transforms (RandomResizedCrop, Normalize, ...) are nn.Modules;
with num_workers=0 they run in the main process inside next(loader), with no
backward through them. Here each sample goes through an nn.Sequential of
four transform modules (a resize by interpolation, a Gaussian blur, a
random crop, a per-channel normalisation) in Dataset.__getitem__, sized so that the wait
for data is a planted ~40-60 % of the step. The loop never evaluates.
torchneck must count the transforms' time as data (input_bound), not as
evaluation passes.

    /usr/bin/python3 transform_modules.py [--steps N] [--truth PATH]

--truth PATH writes looptruth.LoopClock's JSON (see looptruth.py), plus
  transform_calls   calls of the transform pipeline (one per sample)
per_step_s: step, data_wait, forward, backward, optimizer.
"""
import time

_T0 = time.perf_counter()

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from looptruth import LoopClock


class Resize(nn.Module):
    def __init__(self, side):
        super().__init__()
        self.side = side

    def forward(self, img):
        return F.interpolate(img[None], size=(self.side, self.side), mode="bilinear", align_corners=False)[0]


class GaussianBlur(nn.Module):
    def __init__(self, size, sigma):
        super().__init__()
        x = torch.arange(size, dtype=torch.float32) - size // 2
        k = torch.exp(-x ** 2 / (2 * sigma ** 2))
        k = torch.outer(k, k) / k.sum() ** 2
        self.register_buffer("kernel", k.expand(3, 1, size, size).contiguous())

    def forward(self, img):
        return F.conv2d(img[None], self.kernel, padding=self.kernel.shape[-1] // 2, groups=3)[0]


class RandomCrop(nn.Module):
    def __init__(self, side):
        super().__init__()
        self.side = side

    def forward(self, img):
        h, w = img.shape[-2:]
        top = int(torch.randint(0, h - self.side + 1, ()))
        left = int(torch.randint(0, w - self.side + 1, ()))
        return img[..., top:top + self.side, left:left + self.side]


class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean)[:, None, None])
        self.register_buffer("std", torch.tensor(std)[:, None, None])

    def forward(self, img):
        return (img - self.mean) / self.std


class DecodedImages(Dataset):
    """Raw 3 x raw x raw images (as if decoded), transformed per sample."""

    def __init__(self, n, raw, side, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(8, 3, raw, raw, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.transform = nn.Sequential(Resize(side + side // 4), GaussianBlur(5, 1.0), RandomCrop(side),
                                       Normalize((0.48, 0.46, 0.41), (0.23, 0.22, 0.23)))
        self.calls = 0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        self.calls += 1
        return self.transform(self.images[i % len(self.images)]), self.labels[i]


class SmallCNN(nn.Module):
    def __init__(self, side, width=8):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.fc = nn.Linear(width * (side // 4) ** 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 4)
        return self.fc(torch.flatten(x, 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--raw", type=int, default=160, help="side of the decoded image")
    p.add_argument("--side", type=int, default=64, help="side after the transforms")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--truth", metavar="PATH")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    data = DecodedImages(a.steps * a.batch, a.raw, a.side, a.seed)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=0)
    model = SmallCNN(a.side)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    clock = LoopClock("transform_modules", "nn.Module transforms in Dataset.__getitem__, num_workers=0")
    it = iter(loader)
    clock.start()
    for step in range(a.steps):
        x, y = clock.next(it)
        with clock.timed("forward"):
            loss = loss_fn(model(x), y)
        with clock.timed("backward"):
            loss.backward()
        with clock.timed("optimizer"):
            opt.step()
        clock.boundary()
        with clock.timed("optimizer"):
            opt.zero_grad()
    clock.stop()
    gt = clock.write(a.truth, {"transform_calls": data.calls})
    print(f"transform_modules: {gt['steps']} steps, data wait {100 * gt['shares']['data_wait']:.1f} % "
          f"of the steps' wall time; script {time.perf_counter() - _T0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
