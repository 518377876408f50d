"""An example script's in-loop time under any torchneck flags, against plain
runs of the same rounds: the quick way to take a cost apart by switching
collectors off one at a time (docs/overhead.md, tiny_ops' known limit).

    /usr/bin/python3 benchmarks/paired_rounds.py ROUNDS STEPS SCRIPT \\
        plain=plain "bare=--python=off --no-gc" ...

Each NAME=FLAGS is one configuration: `plain` runs the script alone,
anything else is `./torchneck run FLAGS -o DIR SCRIPT`. Every round runs each
configuration once, in an order rotated per round; the script's own clock
(its --ground-truth file, examples/ground_truth.py) gives the loop's wall
time and the median step. Printed: medians over rounds of each run's ratio
to the first configuration's run in the same round (this machine's speed
drifts within minutes; a ratio to a separate baseline run would carry it).
Give a second plain configuration to see the noise between two identical
ones. Run from the repository root."""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _overhead():
    """benchmarks/overhead (a script without .py) as a module: its pinned
    malloc thresholds, the same for every process here as there."""
    loader = importlib.machinery.SourceFileLoader("overhead", os.path.join(ROOT, "benchmarks", "overhead"))
    spec = importlib.util.spec_from_loader("overhead", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


ENV = dict(os.environ, **_overhead().PINNED_MALLOC)


def interpreter():
    """The python ./torchneck runs in (build/python-path): plain runs use the
    same one, or the ratios would compare two interpreters."""
    try:
        with open(os.path.join(ROOT, "build", "python-path")) as f:
            return f.readline().strip()
    except OSError:
        sys.exit("paired_rounds: torchneck is not built (no build/python-path); run `make build`")


def run_once(flags, script, steps, work):
    truth = os.path.join(work, "truth.json")
    if flags == "plain":
        argv = [interpreter(), script]
    else:
        argv = ["./torchneck", "run", *flags.split(), "-o", os.path.join(work, "out"), script]
    argv += ["--steps", str(steps), "--ground-truth", truth]
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, text=True)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        sys.exit(f"paired_rounds: {' '.join(argv)} failed ({done.returncode}): {tail[0]}")
    with open(truth) as f:
        gt = json.load(f)
    return gt["loop_wall_s"], gt["step_median_s"]


def main(argv):
    if len(argv) < 5 or any("=" not in c for c in argv[4:]):
        sys.exit(__doc__.split("\n\n")[1])
    rounds, steps, script = int(argv[1]), int(argv[2]), argv[3]
    configs = [c.split("=", 1) for c in argv[4:]]
    names = [name for name, _ in configs]
    if len(set(names)) != len(names):
        sys.exit("paired_rounds: each configuration needs its own name (plain=plain plain2=plain)")
    results = {name: [] for name, _ in configs}
    for r in range(rounds):
        k = r % len(configs)
        for name, flags in configs[k:] + configs[:k]:
            work = tempfile.mkdtemp(prefix="paired-rounds-")
            try:
                results[name].append(run_once(flags, script, steps, work))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    base = results[configs[0][0]]
    print(f"{rounds} rounds, {steps} steps of {script}; ratios to {configs[0][0]} in the same round")
    for name, flags in configs:
        loop = statistics.median(a[0] / b[0] for a, b in zip(results[name], base))
        step = statistics.median(a[1] / b[1] for a, b in zip(results[name], base))
        ms = 1e3 * statistics.median(a[1] for a in results[name])
        print(f"{name:20s} loop {loop:.3f}x  median step {step:.3f}x ({ms:.2f} ms)  [{flags}]")


if __name__ == "__main__":
    main(sys.argv)
