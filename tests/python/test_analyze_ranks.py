"""`torchneck analyze FOLDER` of several ranks' Kineto traces: the same
cross-rank view as a live job's merged report (issue 14): each rank's step
split into data, compute, collective wait and transfer, the collectives
matched across ranks, the ranks' clocks aligned, the straggler named.

Ground truth: traces this test writes itself, with a delay it plants on one
rank and clocks it skews (an NCCL job, where the collective is a device
kernel that waits for the other ranks' kernels; a gloo job on CPU tensors,
where it is the op and its Work), and the two sampled rank traces of a
128-rank job, against what the test reads from their raw events."""

import gzip
import json
import os
import shutil
import statistics
import subprocess

import pytest

from conftest import ROOT, TOOL, load_profile

pytestmark = pytest.mark.native_only

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
SAMPLED = [os.path.join(FIXTURES, f"sampled_rank{r}_of128.trace.json.gz") for r in (0, 1)]

MS = 1000.0  # trace times are microseconds
STEPS = 10
DATA_MS = 2.0
TRANSFER_MS = 5.0
SKEW_US = 2.5e6  # rank 1's clock runs this far ahead of rank 0's


def analyze(args):
    return subprocess.run([TOOL, "analyze", *args], capture_output=True, text=True, timeout=300)


def x(cat, name, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def write_traces(folder, compute_ms, data_ms, device):
    """Two ranks' traces of STEPS steps. Rank r reads its batch for
    data_ms[r], computes for compute_ms[r] (a kernel on a GPU, an operator
    on the CPU), then all-reduces: every rank's part completes TRANSFER_MS
    after the last one arrives. Returns each rank's planted arrival-to-last
    wait per step (ms)."""
    os.makedirs(folder, exist_ok=True)
    events = [[], []]
    corr = [1000]
    begin = 1_700_000_000_000_000.0  # a 2023 clock, in us
    waits = [0.0, 0.0]

    def launch(r, ts, kernel, start, dur, stream):
        corr[0] += 1
        events[r].append(x("cuda_runtime", "cudaLaunchKernel", 100, ts, 10.0, correlation=corr[0]))
        k = x("kernel", kernel, stream, start, dur, device=0, stream=stream, correlation=corr[0])
        k["pid"] = 0
        events[r].append(k)

    for i in range(STEPS):
        arrive = []
        for r in (0, 1):
            t = begin + data_ms[r] * MS
            arrive.append(t + 0.5 * MS + compute_ms[r] * MS if device else t + compute_ms[r] * MS + 0.1 * MS)
        last = max(arrive)
        end = last + TRANSFER_MS * MS
        for r in (0, 1):
            waits[r] += (last - arrive[r]) / MS / STEPS
            t = begin + data_ms[r] * MS
            ev = events[r]
            ev.append(x("user_annotation", f"ProfilerStep#{i}", 100, begin, end + 200 - begin))
            ev.append(x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, begin,
                        data_ms[r] * MS))
            if device:
                ev.append(x("cpu_op", "aten::mm", 100, t, 1000.0))
                launch(r, t + 100, "volta_sgemm_128x64_nn", t + 500, compute_ms[r] * MS, 7)
                ev.append(x("cpu_op", "c10d::allreduce_", 100, t + 1500, 200.0))
                launch(r, t + 1550, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                       arrive[r], end - arrive[r], 20)
                ev.append(x("cuda_runtime", "cudaDeviceSynchronize", 100, t + 1800, end - (t + 1800)))
            else:
                ev.append(x("cpu_op", "aten::mm", 100, t, compute_ms[r] * MS))
                ev.append(x("cpu_op", "c10d::allreduce_", 100, arrive[r], 50.0))
                ev.append(x("user_annotation", "gloo:all_reduce", 101, arrive[r] + 20, end - arrive[r] - 20))
        begin = end + 300
    for r in (0, 1):
        shift = SKEW_US if r == 1 else 0.0
        for e in events[r]:
            e["ts"] += shift
        trace = {"schemaVersion": 1,
                 "distributedInfo": {"backend": "nccl" if device else "gloo", "rank": r, "world_size": 2},
                 "traceEvents": sorted(events[r], key=lambda e: e["ts"])}
        with open(os.path.join(folder, f"rank{r}.trace.json"), "w") as f:
            json.dump(trace, f)
    return waits


def run_pair(tmp_path, name, compute_ms, data_ms, device):
    folder = str(tmp_path / name)
    waits = write_traces(folder, compute_ms, data_ms, device)
    out = str(tmp_path / (name + "-out"))
    r = analyze(["-o", out, folder])
    assert r.returncode == 0, r.stderr
    profile = load_profile(out)
    profile["_dir"] = out
    return r.stdout, profile, waits


def straggler(profile):
    return [f for f in profile["findings"] if f["id"] == "straggler"]


@pytest.mark.parametrize("device", [True, False], ids=["nccl_kernels", "gloo_cpu"])
def test_compute_straggler_from_traces(tmp_path, device):
    extra = 40.0
    text, p, waits = run_pair(tmp_path, "compute", [20.0, 20.0 + extra], [DATA_MS, DATA_MS], device)
    ranks = p["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    # The clocks: rank 1's skew recovered from the completions.
    assert "aligned on the collectives' completions" in p["collectives"]["clock"]
    assert abs(ranks[1]["clock_offset_ns"] + SKEW_US * 1000) < 2000, ranks[1]["clock_offset_ns"]
    assert p["collectives"]["matched"] == STEPS
    # Rank 0 waits for rank 1 the planted delay; both then transfer.
    assert waits[0] == pytest.approx(extra, abs=0.01)
    assert ranks[0]["collective_wait_ms"] == pytest.approx(waits[0], abs=0.5)
    assert ranks[1]["collective_wait_ms"] == pytest.approx(waits[1], abs=0.5)
    for r in ranks:
        assert r["collective_transfer_ms"] == pytest.approx(TRANSFER_MS, abs=0.5)
        assert r["data_ms"] == pytest.approx(DATA_MS, abs=0.1)
        parts = r["data_ms"] + r["compute_ms"] + r["collective_wait_ms"] + r["collective_transfer_ms"]
        assert parts == pytest.approx(r["step_ms"], rel=1e-3)
    # Equal steps (the all-reduce is the barrier), yet the straggler is named.
    assert ranks[0]["step_ms"] == pytest.approx(ranks[1]["step_ms"], abs=0.1)
    (f,) = straggler(p)
    assert f["rank"] == 1 and f["cause"] == "compute"
    assert f["excess_ms"] == pytest.approx(extra, abs=1.0), f
    assert "Ranks: 2" in text
    check_trace_on_one_axis(p["_dir"], device)


def check_trace_on_one_axis(out, device):
    """trace.json has each rank's processes under "rank K", on one time axis:
    the collective completes at one instant on every rank (as planted),
    although rank 1's clock was SKEW_US ahead."""
    with open(os.path.join(out, "trace.json")) as f:
        trace = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("rank 0: ") for n in names.values()), names
    assert any(n.startswith("rank 1: ") for n in names.values()), names
    rank_of = {pid: int(n.split(":")[0].split()[1]) for pid, n in names.items()}
    want = "ncclKernel" if device else "gloo:all_reduce"
    ends = {0: [], 1: []}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e["name"].startswith(want):
            ends[rank_of[e["pid"]]].append(e["ts"] + e["dur"])
    assert ends[0] and len(ends[0]) == len(ends[1]), ends
    for a, b in zip(sorted(ends[0]), sorted(ends[1])):
        assert abs(a - b) < 2.0, (a, b)  # us


def test_input_straggler_from_gloo_traces(tmp_path):
    extra = 30.0
    _, p, waits = run_pair(tmp_path, "input", [20.0, 20.0], [DATA_MS, DATA_MS + extra], False)
    (f,) = straggler(p)
    assert f["rank"] == 1 and f["cause"] == "input"
    assert f["data_excess_ms"] == pytest.approx(extra, abs=1.0)
    assert p["ranks"][0]["collective_wait_ms"] == pytest.approx(waits[0], abs=0.5)


def test_balanced_traces_name_no_straggler(tmp_path):
    _, p, waits = run_pair(tmp_path, "balanced", [20.0, 20.0], [DATA_MS, DATA_MS], True)
    assert waits == [0.0, 0.0]
    assert straggler(p) == []
    for r in p["ranks"]:
        assert r["collective_wait_ms"] == pytest.approx(0.0, abs=0.5)


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def kernel_collectives(events):
    """Each c10d op's NCCL kernel (launched inside it, by correlation id):
    {op name: [(start_us, end_us), ...]} in the order the ops started."""
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("c10d::")),
                 key=lambda e: e["ts"])
    launches = [e for e in events if e.get("cat") == "cuda_runtime"]
    kernels = {e["args"]["correlation"]: e for e in events
               if e.get("cat") == "kernel" and "nccl" in e["name"]}
    out = {}
    for op in ops:
        inside = [kernels[lc["args"]["correlation"]] for lc in launches
                  if lc["tid"] == op["tid"] and op["ts"] <= lc["ts"] < op["ts"] + op["dur"]
                  and lc["args"].get("correlation") in kernels]
        if inside:
            out.setdefault(op["name"], []).append((min(k["ts"] for k in inside),
                                                   max(k["ts"] + k["dur"] for k in inside)))
    return out


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sampled")
    for path in SAMPLED:
        shutil.copy(path, folder)
    out = str(tmp_path_factory.mktemp("sampled-out") / "out")
    r = analyze(["-o", out, str(folder)])
    assert r.returncode == 0, r.stderr
    return r.stdout, load_profile(out)


def test_sampled_rank_traces_compared(sampled):
    """Two of a 128-rank NCCL job's traces: the collectives the test finds
    in the raw events (each c10d op's NCCL kernels), matched k-th to k-th,
    give the waits the report shows."""
    text, p = sampled
    per_rank = [kernel_collectives(load(path)) for path in SAMPLED]
    names = sorted(set(per_rank[0]) & set(per_rank[1]))
    assert names, "the fixtures have NCCL collectives"
    matched = sum(min(len(per_rank[0][n]), len(per_rank[1][n])) for n in names)
    assert p["collectives"]["matched"] == matched
    ends = [per_rank[0][n][k][1] - per_rank[1][n][k][1]
            for n in names for k in range(min(len(per_rank[0][n]), len(per_rank[1][n])))]
    offset_us = statistics.median(ends)
    assert p["ranks"][1]["clock_offset_ns"] / 1000 == pytest.approx(offset_us, abs=1.0)
    by_name = {c["name"]: c for c in p["collectives"]["by_name"]}
    for n in names:
        k = min(len(per_rank[0][n]), len(per_rank[1][n]))
        waits = []
        for i in range(k):
            (s0, e0), (s1, e1) = per_rank[0][n][i], per_rank[1][n][i]
            s1 += offset_us
            e1 += offset_us
            last = max(s0, s1)
            waits += [min(last, e0) - s0, min(last, e1) - s1]
        assert by_name[n]["calls"] == k
        assert by_name[n]["wait_ms"] == pytest.approx(statistics.mean(waits) / 1000, abs=0.01), n
    assert any("2 of the job's 128 ranks" in note for note in p["collectives"]["notes"])
    # Each rank's GPU report is still there, beside its summary.
    assert all("utilization" in r.get("gpu", r) for r in p["ranks"])
    assert "Ranks: 2" in text
