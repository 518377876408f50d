"""Who this process is in a distributed job, and where its profile goes.

A rank started by torchrun (or by hand with RANK/WORLD_SIZE) is known from
its environment before the script starts; one started by
torch.multiprocessing.spawn, or that passes rank= to init_process_group, is
known once the script calls init_process_group, which is watched for the
length of the run (behaviour unchanged). The backend is read there too.

Each rank writes its own folder, BASE/rank-K. BASE is TORCHNECK_RANKS_DIR
when `torchneck torchrun` started the job (it merges the ranks' reports when
torchrun returns), else the run's -o folder (or the default one named after
the job); then rank 0 merges them when the others have ended
(merge_when_done)."""

import functools
import os
import socket
import time

from torchneck import ending_signals
from torchneck import facts
from torchneck import rendezvous

# Set by `torchneck torchrun` (torchrun_cmd.py) for the ranks it starts: the
# job's folder, absolute. The launcher merges; the ranks do not.
RANKS_DIR_ENV = "TORCHNECK_RANKS_DIR"
# How long rank 0 of a job started without `torchneck torchrun` waits for the
# other ranks' profiles before merging what is there (docs/distributed.md).
MERGE_WAIT_ENV = "TORCHNECK_MERGE_WAIT_S"
DEFAULT_MERGE_WAIT_S = 60.0


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return -1


def job_id():
    """The same string in every rank of one job: torchrun's run id, the
    rendezvous address, the world size."""
    parts = [os.environ.get("TORCHELASTIC_RUN_ID", ""),
             f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}",
             os.environ.get("WORLD_SIZE", "")]
    return "|".join(parts) if os.environ.get("MASTER_PORT") or parts[0] else ""


def from_environment():
    """(rank, world_size, local_rank) from a launcher's variables, or None
    when this is not a rank of a job of more than one process."""
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank < 0 or world < 1 or (world == 1 and RANKS_DIR_ENV not in os.environ):
        return None
    return rank, world, _env_int("LOCAL_RANK")


def _init_method(args, kwargs):
    """init_process_group's init_method as the script passed it ("" for the
    default env://, or a store)."""
    value = kwargs.get("init_method", args[1] if len(args) > 1 else None)
    return value if isinstance(value, str) and value != "env://" else ""


class RankWatch:
    """The rank as the environment says and init_process_group confirms.

    on_init, when set, is called with the rank once init_process_group has
    returned (spawned.py names the rank's folder then); so are the
    callables in on_joined, with the rank and the world size (the runner
    puts the detail windows on a rank's schedule). rebind_in: module
    namespaces (dicts) whose own name for init_process_group (`from
    torch.distributed import init_process_group`, bound before install) is
    pointed at the watch too, for the length of the run (a spawned process
    ran its main module before the watch existed)."""

    def __init__(self):
        env = from_environment()
        self.rank, self.world_size, self.local_rank = env if env else (-1, -1, -1)
        self.backend = ""
        self.init_method = ""
        self.on_init = None
        self.on_joined = []
        self.rebind_in = ()
        self._wrapped = None
        self._rebound = []

    @property
    def distributed(self):
        return self.rank >= 0

    def install(self):
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if not hasattr(dist, "init_process_group"):
            return  # a torch built without distributed
        original = dist.init_process_group
        watch = self

        @functools.wraps(original)
        def init_process_group(*args, **kwargs):
            # A rendezvous that does not answer: said in one line, bounded
            # (rendezvous.py); SIGTERM (SIGHUP, ...) meanwhile ends the
            # process as it would unprofiled (torch waits holding the GIL:
            # the runner's handler would run only once the wait is over).
            rendezvous.before_init(args, kwargs)
            with ending_signals.default_meanwhile():
                result = original(*args, **kwargs)
            try:
                watch.rank = int(dist.get_rank())
                watch.world_size = int(dist.get_world_size())
                watch.backend = str(dist.get_backend())
                watch.init_method = _init_method(args, kwargs)
                if watch.on_init is not None:
                    watch.on_init(watch.rank)
                for joined in watch.on_joined:
                    joined(watch.rank, watch.world_size)
            except Exception:  # noqa: BLE001 - facts only; never break the script
                pass
            return result

        dist.init_process_group = init_process_group
        self._wrapped = (dist, original)
        for namespace in self.rebind_in:
            for name, value in list(namespace.items()):
                if value is original:
                    namespace[name] = init_process_group
                    self._rebound.append((namespace, name, original))

    def uninstall(self):
        if self._wrapped is not None:
            dist, original = self._wrapped
            dist.init_process_group = original
            self._wrapped = None
        for namespace, name, original in self._rebound:
            namespace[name] = original
        self._rebound = []

    def facts(self):
        return facts.rank_info(rank=self.rank, world_size=self.world_size, local_rank=self.local_rank,
                               backend=self.backend, host=socket.gethostname() if self.distributed else "",
                               job=self.job() if self.distributed else "")

    def job(self):
        """job_id(), or for ranks that rendezvous at an init_method of their
        own (tcp://HOST:PORT, file://PATH, as spawned ranks often do), that
        address and the world size: the same in every rank of the job."""
        return job_id() or (f"|{self.init_method}|{self.world_size}" if self.init_method else "")


def base_dir(requested):
    """The job's folder for a rank started by a launcher: TORCHNECK_RANKS_DIR
    (from `torchneck torchrun`), else -o's, else None (the default one)."""
    return os.environ.get(RANKS_DIR_ENV) or requested or None


def default_base(display):
    """Without -o: one folder per job, the same in every rank (the run id
    or rendezvous port says which job)."""
    stem = display[3:] if display.startswith("-m ") else os.path.basename(display)
    if stem.endswith(".py"):
        stem = stem[:-3]
    tag = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if tag in ("", "none"):
        tag = "port" + os.environ.get("MASTER_PORT", "0")
    return os.path.join("torchneck-out", f"{stem or 'run'}-ranks-{tag}")


def rank_dir(base, rank):
    return os.path.join(base, f"rank-{rank}")


def launcher_merges():
    return RANKS_DIR_ENV in os.environ


def finished(folder):
    """A rank's final report is written (profile.json comes with it, not
    with a periodic spill)."""
    return os.path.exists(os.path.join(folder, "profile.json"))


def wait_for_ranks(base, world_size, timeout_s):
    """Rank 0's wait for the other ranks' profiles (bounded): True when
    every rank folder has its final profile."""
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [k for k in range(world_size) if not finished(rank_dir(base, k))]
        if not pending or time.monotonic() >= deadline:
            return not pending
        time.sleep(0.2)
