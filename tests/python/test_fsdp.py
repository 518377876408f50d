"""FSDP (FullyShardedDataParallel, FULL_SHARD, 2 ranks on gloo with CPU
tensors): its all-gathers and reduce-scatters are recognised as
collectives, live (`torchneck torchrun`) and in Kineto traces of the same
job (`torchneck analyze FOLDER`), against what each rank counts of its own
calls (fsdp_train.py's --truth: FSDP's calls of dist.all_gather and
dist.reduce_scatter_tensor, and its steps by perf_counter).

What FSDP does per step here (3 Linear units, the root owning no
parameter): every unit all-gathers its parameters before forward and again
before backward (FULL_SHARD frees them after forward), and reduce-scatters
its gradient after backward: 6 all-gathers and 3 reduce-scatters a step.
On CPU FSDP all-gathers through all_gather of a list (c10d::allgather_,
gloo:all_gather); gloo runs reduce_scatter_tensor (c10d::_reduce_scatter_base_)
as an all-reduce (its Work is gloo:all_reduce).

torch 1.13 (Debian 12) cannot import torch.distributed.fsdp on Python 3.11
(a dataclass with a mutable default, in torch.distributed._shard), and its
FSDP needs CUDA: skipped there. Measured in torch 2.6 (Debian 13)."""

import os
import socket
import subprocess

import pytest

from conftest import PYTHON, ROOT, TOOL, load_profile, script
from test_distributed import compared_steps, detailed_steps, own_mean, truths

TRAIN = script(os.path.join("dist", "fsdp_train.py"))
ENV = dict(os.environ, USE_LIBUV="0")  # torch 2.x as Debian builds it has no libuv
STEPS = 20
UNITS = 3  # fsdp_train.py's --layers: one FSDP unit per Linear


def fsdp_unusable():
    """Why FSDP cannot run on CPU with this torch, or "" when it can."""
    r = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__); import torch.distributed.fsdp"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"torch {r.stdout.strip()}: torch.distributed.fsdp does not import here: {last}"
    version = tuple(int(p) for p in r.stdout.strip().split("+")[0].split(".")[:2])
    if version < (2, 2):
        return f"torch {r.stdout.strip()}'s FSDP needs CUDA"
    return ""


UNUSABLE = fsdp_unusable()
pytestmark = pytest.mark.skipif(bool(UNUSABLE), reason=UNUSABLE)




def by_kind(prof):
    kinds = {}
    for c in prof["collectives"]["by_name"]:
        kinds.setdefault(c["kind"], []).append(c)
    return kinds


def check_collectives(prof, t, steps, seen=None):
    """Both ranks, and the all-gathers and reduce-scatters each rank made,
    as many as it counted in the SEEN steps (all STEPS by default), every
    one paired with its Work (completed)."""
    seen = steps if seen is None else seen
    assert [r["rank"] for r in prof["ranks"]] == [0, 1]
    for r in (0, 1):
        assert t[r]["setup_calls"] == {}  # FSDP's set-up made no collective: all are the steps'
        assert t[r]["calls"] == {"all_gather": 2 * UNITS * steps, "reduce_scatter_tensor": UNITS * steps}
    kinds = by_kind(prof)
    assert set(kinds) == {"all_gather", "reduce_scatter"}, kinds
    (ag,), (rs,) = kinds["all_gather"], kinds["reduce_scatter"]
    assert ag["name"] == "c10d::allgather_"
    assert rs["name"] == "c10d::_reduce_scatter_base_"
    assert ag["calls"] == t[0]["calls"]["all_gather"] // steps * seen
    assert rs["calls"] == t[0]["calls"]["reduce_scatter_tensor"] // steps * seen
    assert prof["collectives"]["matched"] == ag["calls"] + rs["calls"]  # every one completed on both ranks
    for c in (ag, rs):
        assert c["mean_ms"] > 0
        assert c["mean_ms"] == pytest.approx(c["wait_ms"] + c["transfer_ms"], rel=1e-6, abs=1e-6)
    for r in prof["ranks"]:
        assert r["collectives"] == ag["calls"] + rs["calls"]
    return ag, rs


def test_fsdp_all_gathers_and_reduce_scatters_under_torchrun(tmp_path):
    out, truth = str(tmp_path / "out"), str(tmp_path / "truth")
    r = subprocess.run([TOOL, "torchrun", "-o", out, "--nproc_per_node=2", TRAIN, "--steps", str(STEPS),
                        "--truth", truth], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    prof = load_profile(out)
    t = truths(truth)
    # A collective's arrival is seen in the steps both ranks detailed (the
    # same steps: docs/overhead.md), and every one of those is
    ag, rs = check_collectives(prof, t, STEPS, detailed_steps(out))
    assert ag["bytes_per_call"] > 0 and rs["bytes_per_call"] > 0  # the Works' inputs
    found = {f["id"] for f in prof["findings"]}
    assert "straggler" not in found and "load_imbalance" not in found, found
    steps = compared_steps(out)
    for rank in prof["ranks"]:  # each rank's mean step, as its own clock measured it, over the compared steps
        own = own_mean(t[rank["rank"]]["steps"], steps)
        assert rank["step_ms"] == pytest.approx(own, rel=0.15), (rank, own)
    report = open(os.path.join(out, "report.txt")).read()
    assert "all_gather" in report and "reduce_scatter" in report


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fsdp_rank_traces_show_the_same_collectives(tmp_path):
    """Each rank records its steps with torch.profiler and exports a Chrome
    trace (no torchneck in the run); `torchneck analyze FOLDER` finds in them
    the collectives the ranks counted."""
    if not subprocess.run([PYTHON, "-c", "import torch, sys; sys.exit(not torch.autograd.kineto_available())"],
                          timeout=120).returncode == 0:
        pytest.skip("this torch has no Kineto: torch.profiler writes no trace")
    traces, truth = str(tmp_path / "traces"), str(tmp_path / "truth")
    port = str(free_port())
    procs = [subprocess.Popen([PYTHON, TRAIN, "--steps", str(STEPS), "--truth", truth, "--trace", traces],
                              env=dict(ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r), WORLD_SIZE="2",
                                       LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    assert sorted(os.listdir(traces)) == ["rank0.trace.json", "rank1.trace.json"]
    out = str(tmp_path / "out")
    r = subprocess.run([TOOL, "analyze", "-o", out, traces], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    prof = load_profile(out)
    check_collectives(prof, truths(truth), STEPS)
