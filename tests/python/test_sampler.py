"""The Python sampler against ground truth the workload measures itself.

GIVEN scripts/sampler_workload.py, which times planted phases with
      time.perf_counter (pure-Python busy loop, time.sleep, busy loop on a
      thread started after the profiler, ~1 ms Python bursts each followed by a
      GIL-releasing call) and writes the seconds to a JSON file
WHEN  it runs under `./torchneck run --python=sample -o OUTDIR`
THEN  profile.json's self_ms for each planted function matches the script's
      own measurement within what 200 Hz sampling can honestly promise.

Run with: /usr/bin/python3 -m pytest tests/python/test_sampler.py
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "torchneck"
WORKLOAD = ROOT / "tests" / "python" / "scripts" / "sampler_workload.py"

PLANTED = ("busy_python_loop", "sleeping_in_time_sleep", "thread_busy_worker")


def tolerance_ms(truth_ms):
    # At 200 Hz one sample stands for ~5 ms; a phase of a few hundred ms gets
    # ~100 samples, whose edges (first and last sample of the phase) and GIL
    # hand-offs cost up to a few samples. 15 % or 30 ms, whichever is larger.
    return max(0.15 * truth_ms, 30.0)


def run_profiled(tmp_path, *extra):
    out = tmp_path / "out"
    truth_path = tmp_path / "truth.json"
    cmd = [str(CLI), "run", "--python=sample", "-o", str(out), str(WORKLOAD),
           str(truth_path), *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    profile = json.loads((out / "profile.json").read_text())
    truth = json.loads(truth_path.read_text())
    return profile, truth


def rows_of(profile, function):
    """The profile rows for a planted function defined in the workload."""
    return [
        r for r in profile["python"]
        if r["function"] == function and Path(r["file"]).name == WORKLOAD.name
    ]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return run_profiled(tmp_path_factory.mktemp("sampler"))


@pytest.mark.parametrize("function", PLANTED)
def test_self_time_matches_ground_truth(default_run, function):
    profile, truth = default_run
    rows = rows_of(profile, function)
    assert len(rows) == 1, f"expected one row for {function}, got {rows}"
    row = rows[0]
    truth_ms = truth[function] * 1000.0
    tol = tolerance_ms(truth_ms)
    assert abs(row["self_ms"] - truth_ms) <= tol, (
        f"{function}: sampled self {row['self_ms']:.1f} ms, "
        f"script measured {truth_ms:.1f} ms (tolerance {tol:.1f} ms)"
    )


def test_rows_have_the_documented_fields(default_run):
    profile, _ = default_run
    row = rows_of(profile, "busy_python_loop")[0]
    for key in ("function", "file", "line", "calls", "self_ms", "total_ms"):
        assert key in row, f"missing {key} in {row}"
    # A planted leaf function: everything it does is in itself (time.perf_counter
    # is C and has no frame), so total equals self up to one sample.
    assert row["total_ms"] >= row["self_ms"]
    assert row["total_ms"] - row["self_ms"] <= tolerance_ms(row["self_ms"])
    assert row["line"] > 0


def test_callers_total_includes_planted_callees(default_run):
    profile, truth = default_run
    main_rows = rows_of(profile, "main")
    assert len(main_rows) == 1
    # main() runs the two main-thread phases and waits for the worker thread:
    # its total covers at least the two main-thread phases.
    main_thread_ms = (truth["busy_python_loop"] + truth["sleeping_in_time_sleep"]) * 1000.0
    assert main_rows[0]["total_ms"] >= main_thread_ms - tolerance_ms(main_thread_ms)


def burst_share(profile, truth):
    """short_python_burst's part of the burst phase (its self time over its own
    and gil_release_caller's): sampled, and as the script timed it."""
    sampled = {f: rows_of(profile, f)[0]["self_ms"] for f in ("short_python_burst", "gil_release_caller")}
    total = sum(sampled.values())
    assert total > 0, sampled
    truth_s = truth["short_python_burst"] / (truth["short_python_burst"] + truth["gil_release_caller"])
    return sampled["short_python_burst"] / total, truth_s


def test_short_bursts_are_charged_to_themselves(default_run):
    # ~1 ms of Python, then a call that releases the GIL, again and again: a
    # sampler that gets the GIL only when it is released charges ~all of the
    # phase to the releasing caller (3 % to the bursts, measured on 3.13 before
    # the switch interval was lowered there), while the script's own clock
    # puts ~99 % in the bursts.
    profile, truth = default_run
    sampled, measured = burst_share(profile, truth)
    assert measured > 0.9, measured  # the workload is what it claims to be
    message = (f"bursts got {100 * sampled:.0f} % of the phase's samples; "
               f"the script measured {100 * measured:.0f} % in them")
    if sys.version_info[:2] == (3, 13):
        # the sampler asks the main thread for the GIL itself (sampler.cc):
        # the hand-over no longer waits for the OS to run the sampler
        assert abs(sampled - measured) <= 0.10, message
    else:
        # a lowered switch interval only: when every core is busy the OS
        # delays the hand-over and part of the bias returns (30-50 % to the
        # bursts on 3.11 on a 2-core machine under a load of 12), hence a bound
        # only a biased sampler fails: 15 %, 5x the biased share.
        assert sampled >= 0.15, message


def test_longer_phases_scale(tmp_path):
    # Different lengths than the default run: the sampler must follow the
    # workload, not a constant.
    profile, truth = run_profiled(tmp_path, "--busy", "1.0", "--sleep", "0.15",
                                  "--thread", "0.25", "--bursts", "0.9", "--burst-ms", "2")
    for function in PLANTED:
        row = rows_of(profile, function)[0]
        truth_ms = truth[function] * 1000.0
        assert abs(row["self_ms"] - truth_ms) <= tolerance_ms(truth_ms), (
            function, row["self_ms"], truth_ms)
    sampled, measured = burst_share(profile, truth)
    assert measured > 0.9 and sampled >= 0.15, (sampled, measured)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"] + sys.argv[1:]))
