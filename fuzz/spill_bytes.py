"""Damaged spills are never read silently: copies of a run's profile.spill,
each with one byte changed at a random position (seeded), are given to
`torchneck report`. Each copy must be refused (exit 2, one line on stderr:
"torchneck: " and a message) or give the same profile.json as the undamaged
spill; anything else (a changed number, a traceback, a crash, a hang) is a
failure. Prints the tally and exits 1 on any failure.

    python fuzz/spill_bytes.py [--count N] [--seed S] [--keep DIR]

tests/python/test_spill_damage.py runs the same trials, fewer of them."""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "torchneck")
# A report is rebuilt in a few seconds; a copy that takes this long hangs.
REPORT_TIMEOUT_S = 120

# A small training loop: steps, modules, an optimizer and a DataLoader, so
# that the spill has every kind of section a report reads numbers from.
SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(640, 32), torch.randn(640, 8)), batch_size=16)
for x, y in data:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
"""


def make_run(work):
    """Runs SCRIPT under `torchneck run`; returns its output folder."""
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    out = os.path.join(work, "run")
    r = subprocess.run([TOOL, "run", "-o", out, script], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"the run failed ({r.returncode}): {r.stderr[-2000:]}")
    return out


def report(spill_bytes, folder):
    """`torchneck report` of a folder holding only SPILL_BYTES as its
    profile.spill: (CompletedProcess, profile.json parsed or None)."""
    os.makedirs(folder)
    with open(os.path.join(folder, "profile.spill"), "wb") as f:
        f.write(spill_bytes)
    r = subprocess.run([TOOL, "report", folder], capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
    profile = None
    if r.returncode == 0:
        with open(os.path.join(folder, "profile.json")) as f:
            profile = json.load(f)
    return r, profile


def damaged(spill_bytes, rng):
    """SPILL_BYTES with one byte changed: (bytes, position, old, new)."""
    at = rng.randrange(len(spill_bytes))
    old = spill_bytes[at]
    new = old ^ rng.randrange(1, 256)
    return spill_bytes[:at] + bytes([new]) + spill_bytes[at + 1:], at, old, new


def outcome(r, profile, reference):
    """'refused', 'identical', or what went wrong."""
    lines = r.stderr.splitlines()
    if "Traceback" in r.stderr:
        return f"a traceback (exit {r.returncode}): {r.stderr[-1500:]}"
    if r.returncode == 2:
        one = len(lines) == 1 and lines[0].startswith("torchneck: ") and lines[0][len("torchneck: "):].strip()
        return "refused" if one else f"refused without one line and a message: {r.stderr!r}"
    if r.returncode == 0:
        return "identical" if profile == reference else "accepted with a different profile.json"
    return f"exit {r.returncode}: {r.stderr[-1500:]!r}"


def trials(spill_bytes, reference, work, count, seed):
    """COUNT damaged copies reported in WORK: yields (position, old, new, outcome)."""
    rng = random.Random(seed)
    for i in range(count):
        copy, at, old, new = damaged(spill_bytes, rng)
        folder = os.path.join(work, f"damaged-{i}")
        try:
            r, profile = report(copy, folder)
            what = outcome(r, profile, reference)
        except subprocess.TimeoutExpired:
            what = f"no answer in {REPORT_TIMEOUT_S} s (a hang)"
        shutil.rmtree(folder, ignore_errors=True)
        yield at, old, new, what


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="a folder to work in and keep (default: a temporary one, removed)")
    a = ap.parse_args(argv)
    work = a.keep or tempfile.mkdtemp(prefix="spill_bytes-")
    os.makedirs(work, exist_ok=True)
    try:
        with open(os.path.join(make_run(work), "profile.spill"), "rb") as f:
            spill_bytes = f.read()
        r, reference = report(spill_bytes, os.path.join(work, "undamaged"))
        if r.returncode != 0:
            print(f"the undamaged spill was refused: {r.stderr}", file=sys.stderr)
            return 1
        tally, failures = {"refused": 0, "identical": 0}, []
        for at, old, new, what in trials(spill_bytes, reference, work, a.count, a.seed):
            if what in tally:
                tally[what] += 1
            else:
                failures.append(f"byte {at} {old:#04x} -> {new:#04x}: {what}")
        print(f"{a.count} copies of a {len(spill_bytes)}-byte spill, one byte changed each (seed {a.seed}): "
              f"{tally['refused']} refused, {tally['identical']} accepted with the same profile.json, "
              f"{len(failures)} failed")
        for line in failures:
            print("  " + line)
        return 1 if failures else 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
