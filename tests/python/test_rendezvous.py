"""A rendezvous that never answers (rendezvous.py): `torchneck torchrun`
refuses it in one line after a bounded wait, before any rank starts; a rank
started by hand says in one line what it waits for, and a SIGTERM ends it
as it ends it unprofiled, leaving its last spill. The waits are bounded by
TORCHNECK_RDZV_WAIT_S, small here; the stores are real ones (a TCPStore
this test hosts) or a listener that accepts and never answers."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, TOOL, load_profile, script
from test_distributed import ENV, check_ranks_against_truth, free_port

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import rendezvous  # noqa: E402

TRAIN = script(os.path.join("dist", "ddp_train.py"))
# No rendezvous store is at TEST-NET-2 (RFC 5737): unroutable, or (behind a
# transparent proxy, as on this VM) a connection that is accepted and
# never answered.
NOWHERE = "198.51.100.1"
WAIT = dict(ENV, TORCHNECK_RDZV_WAIT_S="2")


class Silent:
    """A TCP listener on 127.0.0.1 that accepts and never answers: a peer
    that is not a store."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def silent():
    s = Silent()
    yield s
    s.close()


def host_store():
    import datetime

    import torch.distributed as dist

    kwargs = dict(is_master=True, timeout=datetime.timedelta(seconds=30), wait_for_workers=False)
    try:
        return dist.TCPStore("127.0.0.1", 0, 1, use_libuv=False, **kwargs)
    except TypeError:  # torch 1.13
        return dist.TCPStore("127.0.0.1", 0, 1, **kwargs)


def test_the_probe_finds_a_store_and_adds_nothing_to_it(silent):
    store = host_store()
    store.set("a", "1")
    keys = store.num_keys()
    assert rendezvous.wait_for_store("127.0.0.1", store.port, 20) is None
    # no worker counted (wait_for_workers would add to the host's init key)
    assert store.num_keys() == keys
    why = rendezvous.wait_for_store("127.0.0.1", silent.port, 1)
    assert why, "a listener that never answers is not a store"


def torchrun_parsed(*argv):
    from torch.distributed.run import get_args_parser

    return get_args_parser().parse_args(list(argv) + ["train.py"])


@pytest.mark.parametrize("argv,expected", [
    (["--nproc_per_node=2"], None),  # one node: static on node 0, which hosts the store
    (["--standalone", "--nproc_per_node=2"], None),
    (["--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:29400"], None),
    (["--nnodes=2", "--rdzv_backend=c10d", f"--rdzv_endpoint={NOWHERE}"], (NOWHERE, 29400, 60.0)),
    (["--nnodes=2", "--rdzv_backend=c10d", f"--rdzv_endpoint={NOWHERE}:1234", "--rdzv_conf=read_timeout=30"],
     (NOWHERE, 1234, 30.0)),
    (["--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=/tmp/x", "--rdzv_conf=store_type=file"], None),
    (["--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:29401", "--rdzv_conf=is_host=0"],
     ("127.0.0.1", 29401, 60.0)),
    (["--nnodes=2", "--rdzv_backend=c10d", f"--rdzv_endpoint={NOWHERE}", "--rdzv_conf=is_host=true"], None),
    (["--nnodes=2", "--node_rank=0", f"--master_addr={NOWHERE}"], None),
    (["--nnodes=2", "--node_rank=1", f"--master_addr={NOWHERE}", "--master_port=29511"], (NOWHERE, 29511, 600.0)),
])
def test_which_store_a_node_joins(argv, expected):
    found = rendezvous.torchrun_store(torchrun_parsed(*argv))
    assert (found if found is None else (found[0], found[1], found[3])) == expected


@pytest.mark.parametrize("options", [
    ["--nnodes=2", "--rdzv_backend=c10d", f"--rdzv_endpoint={NOWHERE}:29400", "--rdzv_id=t"],
    ["--nnodes=2", "--node_rank=1", f"--master_addr={NOWHERE}", "--master_port=29400"],
])
def test_torchrun_refuses_a_rendezvous_that_never_answers(tmp_path, options):
    out = str(tmp_path / "out")
    r = subprocess.run([TOOL, "torchrun", "-o", out, "--nproc_per_node=1", *options, TRAIN], env=WAIT,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    assert f"no rendezvous store answered at {NOWHERE}:29400" in lines[0] and "in 2 s" in lines[0], lines[0]
    assert "No rank was started" in lines[0]
    assert not os.path.exists(out)  # a refused invocation leaves nothing behind


def test_a_wait_that_is_not_seconds_is_one_line(tmp_path):
    r = subprocess.run([TOOL, "torchrun", "-o", str(tmp_path / "out"), "--nnodes=2", "--rdzv_backend=c10d",
                        f"--rdzv_endpoint={NOWHERE}", TRAIN], env=dict(ENV, TORCHNECK_RDZV_WAIT_S="soon"),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["torchneck: TORCHNECK_RDZV_WAIT_S must be a number of seconds "
                                             "above 0, not 'soon'"]


def wait_for(predicate, what, guard_s=120):
    """A hang guard, not a time limit: fails only if it never happens."""
    deadline = time.monotonic() + guard_s
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_a_rank_by_hand_says_what_it_waits_for_and_sigterm_ends_it(tmp_path, silent):
    out = str(tmp_path / "out")
    env = dict(WAIT, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(silent.port), RANK="1", WORLD_SIZE="2",
               LOCAL_RANK="1")
    p = subprocess.Popen([TOOL, "run", "-o", out, TRAIN], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    reader.start()
    try:
        said = lambda: [x for x in lines if x.startswith("torchneck: rank 1 has waited")]  # noqa: E731
        wait_for(said, "the rank's line")
        line = said()[0]
        assert f"for its rendezvous at 127.0.0.1:{silent.port}" in line and "2 s" in line, line
        assert "up to its timeout, 1800 s" in line, line
        # torch goes on waiting (its timeout, 30 min): the training's
        # semantics are torch's. Its last spill is there ...
        wait_for(lambda: os.path.exists(os.path.join(out, "rank-1", "profile.spill")), "a spill")
        assert p.poll() is None
        # ... and SIGTERM ends it at once, as it ends it unprofiled (the
        # default action: torch waits holding the GIL, where no handler runs).
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == -signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join(timeout=10)
    assert len(said()) == 1
    r = subprocess.run([TOOL, "report", os.path.join(out, "rank-1")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_two_nodes_meet_at_a_store_the_probe_waits_for(tmp_path):
    # Two "nodes" on this host, one rank each: node 1 joins the store node
    # 0 hosts (is_host=0; on its own host it would host one itself) and is
    # started first, so its probe waits for that store, then torchrun runs.
    # Every node's rank writes into the one folder; `torchneck report`
    # merges them, as on a shared file system.
    out, truth = str(tmp_path / "out"), str(tmp_path / "truth")
    common = ["--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{free_port()}",
              "--rdzv_id=two"]
    procs = []
    for node in (1, 0):
        procs.append(subprocess.Popen([TOOL, "torchrun", "-o", out, *common, f"--rdzv_conf=is_host={1 - node}", TRAIN,
                                       "--truth", truth], env=ENV, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for e in errors]
    assert not any("no rendezvous store answered" in e for e in errors)
    r = subprocess.run([TOOL, "report", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    check_ranks_against_truth(load_profile(out), truth, out)
