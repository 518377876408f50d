"""A rendezvous that does not answer: a bounded wait, said in one line
(docs/distributed.md).

`torchneck torchrun` on a node that does not host the rendezvous store
(c10d's --rdzv_endpoint on another host; static's --master_addr with
--node_rank above 0) asks the store whether it answers before torchrun
starts: a TCPStore client that sets a key, waits for it and removes it,
again every second, for at most TORCHNECK_RDZV_WAIT_S; by default as long
as torch's launcher would wait for it (c10d: read_timeout, 60 s; static:
timeout, 600 s; or what --rdzv_conf says). A store that never answers is one line and exit status
2, before any rank starts.

A rank that joins a store another process hosts (rank > 0 of ranks started
by hand, under a launcher of the user's own, or by
torch.multiprocessing.spawn) asks it the same way before its
init_process_group does: torch 1.13 waits in init_process_group holding
the GIL, so nothing in the process can say anything meanwhile. If the
store has not answered within TORCHNECK_RDZV_WAIT_S (default 60 s), one
line says what the rank waits for and for how long torch will; then
init_process_group runs as it would have: the training's semantics are
unchanged. While init_process_group waits, SIGTERM acts as it would
without torchneck (this_rank.RankWatch)."""

import contextlib
import datetime
import os
import sys
import threading
import time

from torchneck.errors import UsageError
from torchneck.errors import one_line as _one_line
from torchneck.errors import say as _say

WAIT_ENV = "TORCHNECK_RDZV_WAIT_S"
# A rank's wait before it says what it waits for.
DEFAULT_RANK_WAIT_S = 60.0
# torch's launcher's own waits for its store (torch.distributed.elastic.rendezvous).
_TORCH_WAITS = {"c10d": ("read_timeout", 60.0), "static": ("timeout", 600.0)}
# One attempt's bound: a store that does not answer holds the GIL this long
# at most (a SIGTERM is acted on between attempts).
_ATTEMPT_S = 5.0
# The key a probe sets, waits for and removes.
_PROBE_KEY = "torchneck/rendezvous-probe"
# init_process_group's default timeout (torch.distributed.constants).
_TORCH_PG_TIMEOUT_S = 1800.0



def _wait_s(default):
    """TORCHNECK_RDZV_WAIT_S, else DEFAULT; a bad value is one line and exit 2."""
    value = os.environ.get(WAIT_ENV, "")
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UsageError(f"{WAIT_ENV} must be a number of seconds above 0, not '{value}'")
    return seconds


@contextlib.contextmanager
def _quiet_stderr(quiet):
    """torch's C++ log lines (each failed connect) kept off stderr: the
    launcher says it in its one line."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def ask(host, port, timeout_s, quiet=False):
    """None when a TCPStore at HOST:PORT answers within TIMEOUT_S, else why
    not (one line). A client that is not counted as a worker
    (wait_for_workers=False); the one key it sets it removes.

    In a thread of its own: torch 2.6's client waits for a peer that
    accepts and never answers with no bound (its ping), so after
    TIMEOUT_S it is left behind, blocked on that peer. torch 1.13 bounds
    each step by TIMEOUT_S itself (and holds the GIL meanwhile)."""
    result = []
    attempt = threading.Thread(target=lambda: result.append(_ask(host, port, timeout_s)),
                               name="torchneck-rendezvous-probe", daemon=True)
    with _quiet_stderr(quiet):
        attempt.start()
        attempt.join(timeout_s + 1.0)
    return result[0] if result else f"connected, and no answer in {timeout_s:g} s"


def _ask(host, port, timeout_s):
    import torch.distributed as dist

    kwargs = dict(is_master=False, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)
    try:
        try:
            store = dist.TCPStore(host, port, use_libuv=False, **kwargs)
        except TypeError:  # torch 1.13: no use_libuv (nor libuv)
            store = dist.TCPStore(host, port, **kwargs)
        # Only waits are bounded by the store's timeout (torch 1.13 reads
        # any other answer with no bound): a key of our own set, waited
        # for, and removed once a store has answered.
        store.set(_PROBE_KEY, "")
        store.wait([_PROBE_KEY], datetime.timedelta(seconds=timeout_s))
        store.delete_key(_PROBE_KEY)
        del store
        return None
    except Exception as e:  # noqa: BLE001 - torch's errors (RuntimeError, DistNetworkError, ...) say why
        return _one_line(e) or type(e).__name__


def wait_for_store(host, port, wait_s, quiet=False):
    """Asks until the store answers (None) or WAIT_S has passed (the last
    reason it did not)."""
    deadline = time.monotonic() + wait_s
    why = "no answer"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return why
        why = ask(host, port, max(0.5, min(_ATTEMPT_S, left)), quiet)
        if why is None:
            return None
        time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))


def _conf(rdzv_conf):
    out = {}
    for item in (rdzv_conf or "").split(","):
        key, eq, value = item.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def _is_this_host(host):
    try:
        from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname
    except ImportError:  # a torch without it: only the obvious names
        return host in ("localhost", "127.0.0.1", "::1")
    try:
        return _matches_machine_hostname(host)
    except OSError:
        return False


def torchrun_store(parsed):
    """(host, port, what, torch's wait in s) of the store this node joins,
    from torchrun's parsed options; None when this node hosts it, or its
    rendezvous is not a TCPStore (a file store, etcd)."""
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    if getattr(parsed, "standalone", False):
        return None
    backend = getattr(parsed, "rdzv_backend", "static")
    if backend not in _TORCH_WAITS:
        return None
    conf = _conf(getattr(parsed, "rdzv_conf", ""))
    if backend == "static":
        if int(getattr(parsed, "node_rank", 0) or 0) == 0:
            return None  # node 0 hosts it, whatever --master_addr says
        endpoint = parsed.rdzv_endpoint or f"{parsed.master_addr}:{parsed.master_port}"
        host, port = parse_rendezvous_endpoint(endpoint, int(parsed.master_port))
        what = f"--master_addr/--master_port, node {parsed.node_rank}"
    else:
        if conf.get("store_type", "tcp").lower() == "file":
            return None
        host, port = parse_rendezvous_endpoint(parsed.rdzv_endpoint, 29400)
        # Whether this node hosts the store, as torch decides it
        is_host = conf.get("is_host")
        if (is_host.lower() in ("1", "true", "t", "yes", "y")) if is_host is not None else _is_this_host(host):
            return None
        what = "--rdzv_endpoint, c10d"
    name, default = _TORCH_WAITS[backend]
    try:
        torch_wait = float(conf.get(name, default))
    except ValueError:
        torch_wait = default
    return host, port, what, torch_wait


def check_torchrun(parsed):
    """Before torchrun starts: the store this node joins answers within the
    bound, or UsageError (one line, exit 2)."""
    try:
        store = torchrun_store(parsed)
    except ValueError:  # an endpoint torchrun itself refuses, in its own words
        return
    if store is None:
        return
    host, port, what, torch_wait = store
    wait_s = _wait_s(torch_wait)
    why = wait_for_store(host, port, wait_s, quiet=True)
    if why is not None:
        raise UsageError(f"no rendezvous store answered at {host}:{port} ({what}) in {wait_s:g} s ({WAIT_ENV}; "
                         f"torch: {why.rstrip('.')}): is the node that hosts it running, and reachable from this "
                         "host? No rank was started")


def _store_of(args, kwargs):
    """(host, port, rank) of the TCPStore init_process_group would join,
    or None: a store passed in, a file://, or rank 0, which hosts it."""
    from urllib.parse import parse_qs, urlparse

    if kwargs.get("store") is not None or len(args) > 5:
        return None
    method = kwargs.get("init_method", args[1] if len(args) > 1 else None) or "env://"
    if not isinstance(method, str):
        return None
    url = urlparse(method)
    rank = kwargs.get("rank", args[4] if len(args) > 4 else -1)
    if rank is None or int(rank) < 0:
        rank = (parse_qs(url.query).get("rank") or [os.environ.get("RANK", "")])[0]
        rank = int(rank) if str(rank).isdigit() else -1
    if int(rank) <= 0:
        return None
    if url.scheme == "tcp" and url.hostname and url.port:
        return url.hostname, url.port, int(rank)
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if url.scheme == "env" and host and port.isdigit():
        return host, int(port), int(rank)
    return None


def _pg_timeout_s(args, kwargs):
    timeout = kwargs.get("timeout", args[2] if len(args) > 2 else None)
    try:
        return float(timeout.total_seconds())
    except AttributeError:
        return _TORCH_PG_TIMEOUT_S


def before_init(args, kwargs):
    """In a rank, before init_process_group: the store it joins asked for
    a bounded time; one line when it does not answer. Never raises (but
    for the script's own SIGTERM, which ends the run as it would)."""
    try:
        if os.environ.get("TORCHELASTIC_RUN_ID"):
            return  # under torchrun: the agent's store, up before the ranks start
        store = _store_of(args, kwargs)
        if store is None:
            return
        host, port, rank = store
        wait_s = _wait_s(DEFAULT_RANK_WAIT_S)
    except (UsageError, ValueError, TypeError) as e:
        _say(f"torchneck: the rendezvous is not checked: {_one_line(e)}")
        return
    why = wait_for_store(host, port, wait_s)
    if why is not None:
        _say(f"torchneck: rank {rank} has waited {wait_s:g} s ({WAIT_ENV}) for its rendezvous at {host}:{port} (last: {why}); "
             f"init_process_group now waits for it up to its timeout, {_pg_timeout_s(args, kwargs):g} s: "
             "is rank 0 running, and is that address reachable from this host?")


