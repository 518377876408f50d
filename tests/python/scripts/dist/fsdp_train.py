"""A small FSDP training loop on gloo (CPU tensors), for the FSDP tests.
Each rank times itself (perf_counter, the same clock as torchneck's) and
counts the collectives FSDP asks of torch.distributed (its calls of
dist.all_gather, dist.all_gather_into_tensor, dist.reduce_scatter_tensor,
dist.all_reduce, ..., counted by wrapping those functions, which FSDP looks
up on the module at each call), and writes both to --truth (one JSON per
rank): every step's wall time and the calls of each function, at set-up and
in total.

  --api fsdp1   torch.distributed.fsdp.FullyShardedDataParallel, one unit
                per Linear (ModuleWrapPolicy) and the root
  --api fsdp2   fully_shard (torch 2.6: torch.distributed.fsdp.fully_shard)
                on each Linear and the root, on a CPU device mesh
  --sharding    FULL_SHARD (default: all-gather before forward and again
                before backward, reduce-scatter of the gradients),
                SHARD_GRAD_OP, NO_SHARD (fsdp1)
  --trace DIR   record the steps with torch.profiler (CPU activity) and
                export one Chrome trace per rank: DIR/rank{K}.trace.json

Launched by torchrun (env://, gloo).
"""
import argparse
import collections
import functools
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn

COUNTED = ["all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "reduce_scatter", "all_reduce",
           "broadcast", "barrier", "_all_gather_base", "_reduce_scatter_base"]
CALLS = collections.Counter()


def count_calls():
    for name in COUNTED:
        fn = getattr(dist, name, None)
        if fn is None:
            continue

        def counted(*a, __fn=fn, __name=name, **k):
            CALLS[__name] += 1
            return __fn(*a, **k)

        functools.update_wrapper(counted, fn)
        setattr(dist, name, counted)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--api", default="fsdp1", choices=["fsdp1", "fsdp2"])
    p.add_argument("--sharding", default="FULL_SHARD", choices=["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--truth", default="")
    p.add_argument("--trace", default="")
    return p.parse_args(argv)


from ddp_train import Data  # noqa: E402 - the same synthetic dataset as the DDP script, beside this one


def wrap(args, model):
    """The model sharded: one FSDP unit per Linear and the root (which owns
    no parameter of its own: its unit gathers nothing)."""
    if args.api == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        return FSDP(model, sharding_strategy=getattr(ShardingStrategy, args.sharding),
                    auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=torch.device("cpu"), use_orig_params=True)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    reshard = args.sharding == "FULL_SHARD"
    for m in model:
        if isinstance(m, nn.Linear):
            fully_shard(m, mesh=mesh, reshard_after_forward=reshard)
    return fully_shard(model, mesh=mesh, reshard_after_forward=reshard)


def train(args):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    width, batch = 256, 32
    layers = []
    for _ in range(args.layers - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = wrap(args, nn.Sequential(*layers, nn.Linear(width, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(batch * (args.steps + 2), width), batch_size=batch, num_workers=0)
    setup = dict(CALLS)

    prof = None
    if args.trace:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    steps = []
    t_prev = time.perf_counter()
    it = iter(loader)
    for _ in range(args.steps):
        x, y = next(it)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if prof is not None:
            prof.step()
        t = time.perf_counter()
        steps.append(t - t_prev)
        t_prev = t
    if prof is not None:
        prof.__exit__(None, None, None)
        os.makedirs(args.trace, exist_ok=True)
        prof.export_chrome_trace(os.path.join(args.trace, f"rank{rank}.trace.json"))
    if args.truth:
        with open(f"{args.truth}.rank{rank}.json", "w") as f:
            json.dump({"rank": rank, "world": world, "torch": torch.__version__, "api": args.api,
                       "sharding": args.sharding, "steps": steps, "setup_calls": setup, "calls": dict(CALLS)}, f)


if __name__ == "__main__":
    arguments = parse_args()
    count_calls()
    dist.init_process_group("gloo")
    train(arguments)
    dist.destroy_process_group()
