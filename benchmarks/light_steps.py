"""What a light step (between detail windows) costs, in one process: the
steps of tiny_ops' model (examples/tiny_ops.py, no DataLoader) timed by
their own clock, in blocks, against the same process's steps outside them,
so the process-to-process noise of a benchmark of separate runs (4-5 % on
these 2 cores, docs/overhead.md) is not in the figure.

    /usr/bin/python3 benchmarks/light_steps.py [--steps N] [--cycles K] [--skip S] [--bare]

Blocks of N steps, pooled per kind over K cycles (order rotated per
cycle); the median step of each kind as a ratio to the plain steps':
  plain     nothing registered
  thread    after the plain blocks, an idle Python thread is started for
            good (glibc and libstdc++ do not go back to their single-thread
            paths), and these blocks run with it beside them
  observer  interleaved with the thread blocks: a torchneck session (a new
            one a block) with the operator observer only and its detail
            windows; no sampler, memory sampler, GC timing or nn.Module
            scopes. Python's record_function scopes (steps, fetches) are
            recorded by the wrapped class, without a RecordFunction
            callback. The first --skip steps of each block of the second
            part (the session's first window, ~7 steps, and the light steps
            that measure it) are not counted, the next N are, on tiny_ops
            before any window reopens: the light steps' cost, against the
            thread blocks
  stopped   the same session, stopped after those first steps: against
            observer, what the running observer costs a light step; against
            thread, what its first window leaves behind
  callback  as observer, with the class left unwrapped (made to fail, as
            where torch's source cannot be wrapped): the observer's light
            callback for user scopes records them, as before that
--bare adds blocks with one RecordFunction callback for user scopes that
does nothing (a small C++ extension compiled first with
torch.utils.cpp_extension, ~20 s): torch's own cost of any callback.
Run from the repository root after `make build`."""
import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "python")]

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tiny_ops  # noqa: E402

BARE_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
static at::CallbackHandle handle = 0;
static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }
static void on_end(const at::RecordFunction&, at::ObserverContext*) {}
void add_bare() {
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_start, &on_end).scopes({at::RecordScope::USER_SCOPE}));
}
void remove_bare() { if (handle != 0) at::removeCallback(handle); handle = 0; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add_bare); m.def("remove", &remove_bare); }
"""


def build_bare():
    from torch.utils.cpp_extension import load_inline
    where = tempfile.mkdtemp(prefix="light-steps-")
    atexit.register(shutil.rmtree, where, True)  # the loaded module needs it until then
    try:
        return load_inline(name="light_steps_bare", cpp_sources=[BARE_SOURCE],
                           build_directory=where, verbose=False)
    except (RuntimeError, OSError) as e:  # no compiler, no ninja, no torch headers
        sys.exit(f"light_steps: cannot build the --bare extension: {str(e).strip().splitlines()[0]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="steps per block")
    p.add_argument("--cycles", type=int, default=8)
    p.add_argument("--skip", type=int, default=20, help="uncounted steps at the start of the second part's blocks")
    p.add_argument("--bare", action="store_true")
    args = p.parse_args()
    try:
        from torchneck import _torchneck
    except ImportError as e:
        sys.exit(f"light_steps: torchneck's native part is not built for this python ({e}); run `make build`")
    bare = build_bare() if args.bare else None

    torch.manual_seed(0)
    model = tiny_ops.TinyOpsNet(48, 2, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, foreach=False)
    loss_fn = nn.MSELoss()
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    clock = time.perf_counter

    def block(n):
        times = []
        for _ in range(n):
            t0 = clock()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            times.append(clock() - t0)
        return times

    block(50)  # warm-up
    kinds = ["plain", "bare"] if bare else ["plain"]
    times = {k: [] for k in kinds}
    for c in range(args.cycles):
        for kind in kinds[c % len(kinds):] + kinds[:c % len(kinds)]:
            if kind == "bare":
                bare.add()
            times[kind] += block(args.steps)
            if kind == "bare":
                bare.remove()
    # Then an idle thread, for good (the fast paths do not come back), and
    # blocks with and without a session, interleaved: a session per block.
    threading.Thread(target=time.sleep, args=(1e9,), daemon=True).start()
    from torchneck import record_function_wrap
    wrap = record_function_wrap.wrap

    def refuse(*_):
        raise RuntimeError("left unwrapped by light_steps")

    second = ["thread", "observer", "stopped", "callback"]
    for kind in second:
        times[kind] = []
    for c in range(args.cycles):
        for kind in second[c % 4:] + second[:c % 4]:
            session = None
            if kind != "thread":
                record_function_wrap.wrap = refuse if kind == "callback" else wrap
                session = _torchneck.Session(python_mode="off", ops=True, memory_interval_ms=0, gc=False,
                                             nvml_interval_ms=0, modules=False, detail="window")
                session.start()
            block(args.skip)
            if kind == "stopped":
                session.stop()
                session = None
            times[kind] += block(args.steps)
            if session is not None:
                session.stop()
    record_function_wrap.wrap = wrap

    base = statistics.median(times["plain"])
    print(f"tiny_ops' model, torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; "
          f"median step, ratio to plain (in one process)")
    for kind, t in times.items():
        m = statistics.median(t)
        print(f"{kind:9s} {m * 1e3:.3f} ms  {m / base:.3f}x  ({len(t)} steps)")


if __name__ == "__main__":
    main()
