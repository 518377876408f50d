"""DataLoader worker processes (issue 6): each worker is profiled in its own
process under fork, spawn and forkserver (named by the DataLoader's
multiprocessing_context, or set as the default with
multiprocessing.set_start_method), and its numbers match what the worker measured
about itself (tests/python/scripts/workers_slow_transform.py writes the time
from the start of each batch's first item to the end of its collate, from
perf_counter, per pid)."""

import collections
import json
import os

import pytest

from conftest import contended, load_profile, run_plain, run_tool, script


def _self_measurement(path):
    batches = collections.Counter()
    seconds = collections.Counter()
    with open(path) as f:
        for line in f:
            pid, s = line.split()
            batches[int(pid)] += 1
            seconds[int(pid)] += float(s)
    return batches, seconds


@pytest.mark.parametrize("method,persistent,as_default", [
    ("fork", False, False), ("spawn", False, False), ("forkserver", False, False), ("fork", True, False),
    # the process-wide default (Python 3.14 makes forkserver Linux's), no context given
    ("spawn", False, True), ("forkserver", False, True), ("spawn", True, True)])
def test_each_worker_is_profiled_and_matches_its_self_measurement(method, persistent, as_default, tmp_path):
    # GIVEN the same script under plain Python (the oracle for the training);
    # with persistent workers, still alive when the script ends
    extra = (["--persistent"] if persistent else []) + (["--as-default"] if as_default else [])
    plain_truth = str(tmp_path / "plain.truth")
    plain = run_plain([script("workers_slow_transform.py"), "--start-method", method, "--truth", plain_truth,
                       *extra])
    assert plain.returncode == 0, plain.stderr
    # WHEN it runs under torchneck
    truth = str(tmp_path / "truth")
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, script("workers_slow_transform.py"), "--start-method", method, "--truth", truth,
                  *extra])
    assert r.returncode == 0, r.stderr
    # THEN the training is unchanged (same losses, step by step)
    assert r.stdout == plain.stdout
    assert r.stdout.count("loss") == 12
    prof = load_profile(out)
    procs = prof["processes"]
    assert procs[0]["role"] == "main" and procs[0]["pid"] != 0
    workers = [p for p in procs if p["role"] == "dataloader_worker"]
    assert sorted(p["worker_id"] for p in workers) == [0, 1]
    assert all(p["start_method"] == method for p in workers)
    batches, seconds = _self_measurement(truth)
    assert sorted(p["pid"] for p in workers) == sorted(batches)
    for p in workers:
        pid = p["pid"]
        # batches produced: exactly; time producing them: the tool's span
        # (the whole fetch) encloses the worker's own (first item to end of
        # collate), and adds at most 10 % (the fetch's own few lines and one
        # write of the truth line per batch)
        assert p["batches"] == batches[pid], p
        assert seconds[pid] * (1 - 1e-6) <= p["busy_s"] <= seconds[pid] * 1.10, (p, seconds[pid])
        assert p["mean_batch_ms"] == pytest.approx(1e3 * seconds[pid] / batches[pid], rel=0.10)
        assert 0 < p["busy_pct"] <= 100
        # the planted transform is what the worker spent its busy time on
        assert p["top_functions"][0].endswith("(slow_transform)"), p["top_functions"]
    assert prof["worker_python"][0]["function"] == "slow_transform"
    assert os.path.basename(prof["worker_python"][0]["file"]) == "workers_slow_transform.py"
    # each worker's own profile is in the output folder
    files = os.listdir(os.path.join(out, "workers"))
    assert len(files) == 2 and all(f.endswith(".spill") for f in files)
    assert "DataLoader worker processes: 2 profiled" in r.stderr


def test_input_bound_finding_uses_the_workers_numbers(tmp_path):
    # GIVEN workers that are busy producing batches while the main loop waits
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, script("workers_slow_transform.py"), "--truth", str(tmp_path / "t"),
                  "--items", "64"])
    assert r.returncode == 0, r.stderr
    prof = load_profile(out)
    finding = next(f for f in prof["findings"] if f["id"] == "input_bound")
    text = " ".join(finding["evidence"]) + " " + finding["recommendation"]
    # THEN the evidence is the workers' own busy share and hottest function
    assert "worker processes were busy" in text
    assert "slow_transform" in text


def test_a_crash_after_the_epoch_still_reports_the_workers(tmp_path):
    # GIVEN a script whose workers finished their epoch, then a segfault in C
    out = str(tmp_path / "out")
    truth = str(tmp_path / "truth")
    r = run_tool(["-o", out, script("workers_slow_transform.py"), "--truth", truth, "--segv-at-end"])
    # THEN it dies as the script would, and the crash-time report has the workers
    assert r.returncode == -11, r.stderr
    assert "died by SIGSEGV" in r.stderr
    prof = load_profile(out)
    assert prof["run"]["ending"] == "fatal signal SIGSEGV"
    batches, _ = _self_measurement(truth)
    workers = [p for p in prof["processes"] if p["role"] == "dataloader_worker"]
    assert sorted(p["pid"] for p in workers) == sorted(batches)
    assert sum(p["batches"] for p in workers) == sum(batches.values())


def _peak_alive(spans):
    """The most (start, end, count) spans open at one instant."""
    edges = sorted([(s, n) for s, e, n in spans] + [(e, -n) for s, e, n in spans], key=lambda x: (x[0], x[1]))
    alive = peak = 0
    for _, n in edges:
        alive += n
        peak = max(peak, alive)
    return peak


def test_workers_of_two_loaders_alive_at_different_times_compete_only_with_each_other(tmp_path):
    # GIVEN a training loader's 2 busy workers, then an evaluation loader's 2,
    # made after the first iterator was closed (by the script's own clock)
    out, truth_file = str(tmp_path / "out"), str(tmp_path / "truth.json")
    r = run_tool(["-o", out, script("two_loaders.py"), "--truth", truth_file])
    assert r.returncode == 0, r.stderr[-3000:]
    with open(truth_file) as f:
        truth = json.load(f)
    own_peak = _peak_alive([(l["start_s"], l["end_s"], l["workers"]) for l in truth["loaders"]])
    assert own_peak == 2, truth
    # THEN the profile has the 4 workers, whose lifetimes overlap as the script's loaders do
    prof = load_profile(out)
    workers = [p for p in prof["processes"] if p["role"] == "dataloader_worker"]
    assert len(workers) == 4, workers
    assert _peak_alive([(p["start_s"], p["start_s"] + p["wall_s"], 1) for p in workers]) == own_peak
    # AND where the loop waited for a CPU (2 busy workers beside its compute
    # on 2 cores), core_contention advises the workers alive at once
    found = {f["id"]: f for f in prof["findings"]}
    if contended(prof) and prof["env"]["cpu_cores"] < own_peak + max(1, prof["env"]["torch_threads"]):
        f = found["core_contention"]
        assert f"with {own_peak} workers" in f["recommendation"], f
        assert any(f"{own_peak} DataLoader worker process(es) at once (4 in all" in e for e in f["evidence"]), f
    else:
        assert "core_contention" not in found, found["core_contention"]
