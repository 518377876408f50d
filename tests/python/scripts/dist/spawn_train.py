"""ddp_train.py's loop in ranks started the way pytorch/examples' imagenet
starts them: torch.multiprocessing.spawn(worker, nprocs=N, args=(...)), and
in each one init_process_group with an explicit init_method, world_size and
rank (no RANK/WORLD_SIZE in the environment). The options are ddp_train's
(--mode, --truth, ...), and:

  --nprocs N          ranks (2)
  --dist-url URL      init_method (tcp://127.0.0.1:<a free port>)
  --reverse-ranks     process i is rank N-1-i (a node's ranks need not be
                      its spawn indices: imagenet's are node_rank*N + i)
  --no-join           start_processes(join=False), then the script joins
  --start-method M    start_processes(start_method=M) (spawn)
  --as-rank R         no spawn: this process is rank R of --nprocs, each
                      started by hand (the process learns it is a rank
                      only when it joins the group)
"""
import argparse
import os
import socket
import sys

import torch.distributed as dist
import torch.multiprocessing as mp
# Bound to a name of the script's own when the script is imported: in a
# spawned process, before torchneck is there to watch it.
from torch.distributed import init_process_group

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_train  # noqa: E402


def worker(index, args, world):
    rank = world - 1 - index if args.reverse_ranks else index
    init_process_group("gloo", init_method=args.dist_url, world_size=world, rank=rank)
    ddp_train.train(args)
    dist.destroy_process_group()


def free_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--dist-url", default="")
    p.add_argument("--reverse-ranks", action="store_true")
    p.add_argument("--no-join", action="store_true")
    p.add_argument("--start-method", default="spawn")
    p.add_argument("--as-rank", type=int, default=-1)
    arguments = ddp_train.parse_args(parser=p)
    arguments.dist_url = arguments.dist_url or free_url()
    n = arguments.nprocs
    if arguments.as_rank >= 0:
        worker(arguments.as_rank, arguments, n)
    elif arguments.no_join or arguments.start_method != "spawn":
        context = mp.start_processes(worker, args=(arguments, n), nprocs=n, join=not arguments.no_join,
                                     start_method=arguments.start_method)
        while arguments.no_join and not context.join():
            pass
    else:
        mp.spawn(worker, nprocs=n, args=(arguments, n))
    print("spawn returned")
