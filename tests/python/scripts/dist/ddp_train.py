"""A small DDP training loop on gloo with a planted imbalance, for the
distributed tests. Each rank times itself (perf_counter, the same clock as
torchneck's) and writes what it measured to --truth (one JSON per rank):
every step's wall time, its wait for the next batch, the delay planted
in it, and its wait at DDP's synchronisations (from the end of its
backward's compute, the first layer's backward hook, to backward's
return: what it waited for the other ranks' gradients, and their
transfer; and DDP's work before the model's forward, where it rebuilds its
buckets after the first step).

modes:
  balanced       every rank does the same work
  slow_loader    rank --slow-rank's Dataset sleeps --delay-ms per batch
  slow_backward  rank --slow-rank computes for --delay-ms of CPU time inside
                 backward, in a backward hook of the first layer: after DDP
                 has reduced the later layers' gradients, so only the
                 barrier shows it (extra work: on a busy host it lasts
                 longer, as the rest of the step does)
  comm_heavy     a 24 MB buffer all-reduced every step: the transfer dominates
  crash          rank --slow-rank raises at step --crash-step
  kill           rank --slow-rank kills itself with SIGKILL at step --crash-step,
                 or with --kill-after-s S at the first step that starts S
                 seconds or more into the loop, by its own clock (an
                 out-of-memory kill: no Python code runs after it)

--model tiny: in place of the MLP of three 256-wide layers, a deep stack of
Linear(8, 8) blocks with elementwise ops (examples/tiny_ops.py's model,
~2 us per operator): the detail's costliest case, for the overhead
benchmark (benchmarks/distributed/overhead).

Run as a script, the process group comes from the launcher's environment
(env://); spawn_train.py imports parse_args and train to run the same loop
in processes that torch.multiprocessing.spawn starts.
"""
import argparse
import json
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

MODES = ["balanced", "slow_loader", "slow_backward", "comm_heavy", "crash", "kill"]


def parse_args(argv=None, parser=None):
    p = parser or argparse.ArgumentParser()
    p.add_argument("--mode", default="balanced", choices=MODES)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--delay-ms", type=float, default=30.0)
    p.add_argument("--crash-step", type=int, default=8)
    p.add_argument("--kill-after-s", type=float, default=0.0)
    p.add_argument("--truth", default="")
    p.add_argument("--model", default="mlp", choices=["mlp", "tiny"])
    return p.parse_args(argv)


def spin(seconds):
    """Computes for SECONDS of this thread's CPU time, as extra work does:
    on a busy host it lasts longer by its wait for a core, like the rest of
    the step. Returns how long it lasted (perf_counter)."""
    start, cpu = time.perf_counter(), time.thread_time()
    while time.thread_time() - cpu < seconds:
        pass
    return time.perf_counter() - start


class Data(torch.utils.data.Dataset):
    """n samples; past the first `stored` they repeat (a run of many steps,
    as --kill-after-s asks for, without holding all of them)."""

    def __init__(self, n, width, stored=64 * 1002):
        self.n = n
        self.x = torch.randn(min(n, stored), width)
        self.y = torch.randint(0, 10, (min(n, stored),))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        i %= len(self.x)
        return self.x[i], self.y[i]


class TinyBlock(nn.Module):
    """examples/tiny_ops.py's block: a few operators on 8-element rows."""

    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))

    def forward(self, x):
        h = self.fc(x)
        for _ in range(2):
            h = torch.tanh(h) * self.scale + 0.1
        return torch.relu(h) + x


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_queue_s():
    """The main thread's time runnable but waiting for a core, so far
    (Linux schedstat): a busy host's share of the step."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def train(args):
    """The loop, in a process whose default process group is initialised."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    slow = rank == args.slow_rank
    delay = args.delay_ms / 1000.0
    planted = []

    def collate(items):
        if args.mode == "slow_loader" and slow:
            start = time.perf_counter()
            time.sleep(delay)
            planted.append(time.perf_counter() - start)
        return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])

    if args.model == "tiny":
        width, batch = 8, 8
        model = nn.Sequential(*[TinyBlock(width) for _ in range(48)], nn.Linear(width, 10))
    else:
        width, batch = 256, 64
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10))
    # comm_heavy: besides DDP's gradients, a 24 MB buffer all-reduced every
    # step (statistics synchronised by hand): more transfer than arithmetic.
    synced = torch.zeros(6_000_000) if args.mode == "comm_heavy" else None
    if args.mode == "slow_backward" and slow:
        def extra(module, grad_in, grad_out):
            planted.append(spin(delay))
        model[0].register_full_backward_hook(extra)
    # Fires after the spin (hooks run in the order registered): what is
    # left of backward after it is the first layer's own gradient and DDP's
    # wait for every rank's last bucket.
    compute_done = []
    model[0].register_full_backward_hook(lambda *_: compute_done.append(time.perf_counter()))
    # DDP's own work before the model's forward: after the first step it
    # rebuilds its buckets there, a collective every rank waits at.
    forward_start = []
    model[0].register_forward_pre_hook(lambda *_: forward_start.append(time.perf_counter()))
    ddp = DDP(model, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(batch * (args.steps + 2), width), batch_size=batch,
                                         collate_fn=collate, num_workers=0)

    steps, waits, delays, rss, cpus, own, barrier, queued = [], [], [], [], [], [], [], []
    t_prev = time.perf_counter()
    c_prev = time.thread_time()
    q_prev = run_queue_s()
    it = iter(loader)
    loop_start = time.perf_counter()
    for step in range(args.steps):
        n_before = len(planted)
        t0 = time.perf_counter()
        x, y = next(it)
        waits.append(time.perf_counter() - t0)
        if args.mode == "crash" and slow and step == args.crash_step:
            raise RuntimeError(f"rank {rank} fails at step {step}")
        if args.mode == "kill" and slow and (
                time.perf_counter() - loop_start >= args.kill_after_s if args.kill_after_s > 0
                else step == args.crash_step):
            os.kill(os.getpid(), signal.SIGKILL)
        # Forward and the optimizer: the rank's own work, no collective in
        # them (DDP's all-reduce is inside backward), by wall clock.
        f0 = time.perf_counter()
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        f1 = time.perf_counter()
        loss.backward()
        barrier.append(time.perf_counter() - compute_done[-1] + forward_start[-1] - f0)
        if synced is not None:
            dist.all_reduce(synced)
        o0 = time.perf_counter()
        opt.step()
        t = time.perf_counter()
        own.append((f1 - f0) + (t - o0))
        c = time.thread_time()  # the main thread's CPU time: what of the step was computing
        q = run_queue_s()
        queued.append(q - q_prev)
        q_prev = q
        steps.append(t - t_prev)
        cpus.append(c - c_prev)
        c_prev = c
        delays.append(sum(planted[n_before:]))
        rss.append(rss_mib())
        t_prev = t
    if args.truth:
        with open(f"{args.truth}.rank{rank}.json", "w") as f:
            json.dump({"rank": rank, "world": world, "steps": steps, "data_waits": waits, "delays": delays,
                       "rss_mib": rss, "cpu": cpus,
                       "forward_optimizer": own, "barrier_waits": barrier,
                       "runqueue": queued}, f)


if __name__ == "__main__":
    arguments = parse_args()
    dist.init_process_group("gloo")
    train(arguments)
    dist.destroy_process_group()
