"""Long runs (issue 6), with --detail=full (every operator of the run; the
default's detail windows are test_detail_windows.py's): aggregates stay exact for the whole run, timelines
keep a bounded window, every event left out is counted, and memory stops
growing once the window is full. Ground truth: the workload counts its own
aten::add calls and reads its own resident memory (/proc/self/statm).
The steps after the timeline (default detail windows): read from the step
clocks, against the script's own per-step clock (loops/looptruth.py)."""

import json
import os
import statistics

import pytest

from conftest import ROOT, load_profile, run_plain, run_tool, script

WORKLOAD = os.path.join(ROOT, "benchmarks", "long_run_workload.py")
STEPS = 2000  # x 100 adds: 200,000 adds, ~1.15 M operator events in all


def _setup_adds(tmp_path):
    """aten::add calls that torch itself makes outside the workload's loop
    (none on torch 1.13; torch 2.6 makes a few while setting up): the same
    workload profiled with no steps."""
    out = str(tmp_path / "setup")
    r = run_tool(["-o", out, "--detail=full", WORKLOAD, "--out", str(tmp_path / "setup.json"), "--steps", "0"])
    assert r.returncode == 0, r.stderr
    return sum(o["calls"] for o in load_profile(out)["ops"] if o["name"] == "aten::add")


def _growth(marks):
    """Resident memory growth from the second tenth of the run to its end."""
    return marks[-1] - marks[1]


def test_event_window_bounds_memory_and_counts_every_drop(tmp_path):
    # GIVEN the same run unprofiled (the oracle for memory growth)
    plain_out = tmp_path / "plain.json"
    assert run_plain([WORKLOAD, "--out", str(plain_out), "--steps", str(STEPS)]).returncode == 0
    plain = json.loads(plain_out.read_text())
    # WHEN profiled with a small timeline window (20,000 events per thread)
    out = str(tmp_path / "out")
    tn_out = tmp_path / "tn.json"
    r = run_tool(["-o", out, "--detail=full", "--timeline-events", "20000", WORKLOAD, "--out", str(tn_out), "--steps", str(STEPS)])
    assert r.returncode == 0, r.stderr
    got = json.loads(tn_out.read_text())
    prof = load_profile(out)
    # THEN the aggregates count every call of the whole run
    adds = [o["calls"] for o in prof["ops"] if o["name"] == "aten::add"]
    assert got["adds"] == STEPS * 100
    assert adds == [got["adds"] + _setup_adds(tmp_path)]
    # and every event is either in the window or counted as dropped
    all_events = sum(o["calls"] for o in prof["ops"])
    assert prof["timeline_events"] <= 20000 * len(prof["threads"])
    assert prof["timeline_events"] + prof["dropped_events"] == all_events
    assert "beyond the timeline window" in r.stderr
    # and memory does not grow with the run once the window is full: the
    # profiled run grows no more than the plain one, give or take 16 MB
    # (allocator noise and the periodic spill's buffers)
    assert _growth(got["rss_mb"]) <= _growth(plain["rss_mb"]) + 16, (got["rss_mb"], plain["rss_mb"])


def test_timeline_steps_keeps_the_first_steps_and_all_aggregates(tmp_path):
    out = str(tmp_path / "out")
    tn_out = tmp_path / "tn.json"
    r = run_tool(["-o", out, "--detail=full", "--timeline-steps", "50", WORKLOAD, "--out", str(tn_out), "--steps", "400"])
    assert r.returncode == 0, r.stderr
    prof = load_profile(out)
    # the window closed after 50 optimizer steps (+ the one before the first)
    assert any("timeline window: the first 50 step boundaries" in n for n in prof["notes"]), prof["notes"]
    assert prof["steps"]["in_window"] == 51 and prof["steps"]["timeline_truncated"]
    assert prof["steps"]["count"] == 400  # counted over the whole run from the aggregates
    assert prof["dropped_events"] > 0
    # aggregates cover all 400 steps
    assert [o["calls"] for o in prof["ops"] if o["name"] == "aten::add"] == [400 * 100 + _setup_adds(tmp_path)]
    steps = [o["calls"] for o in prof["ops"] if o["name"].startswith("Optimizer.step#")]
    assert steps == [400]


# glibc's thresholds as benchmarks/overhead pins them, so that the heap's
# size follows what is allocated rather than when glibc last trimmed it.
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}
HEAVY_STEPS = 80
# The budget (issue 17: peak memory within +30 MB of plain).
# Measured here at 80 steps (Debian 12, torch 1.13): torchneck's own cost is
# +7-10 MB in 15 of 18 runs and +21-25 MB in 3 (one more of the script's
# 16 MB blocks; cause not found: none in 24 runs with the Python sampler,
# the GC timing or the memory sampler off); the sampled shape signatures,
# malloc'd among the tensors before they moved to core/side_arena.h, made it
# +30-41 MB at 80 steps, growing with the run.
MAX_EXTRA_PEAK_MB = 30


def test_sampled_shapes_do_not_grow_the_scripts_heap(tmp_path):
    # GIVEN heavy_linear unprofiled, its peak resident memory at the end of
    # its loop as it reads it itself (getrusage)
    env = dict(os.environ, **PINNED_MALLOC)
    script = os.path.join(ROOT, "examples", "heavy_linear.py")
    plain_gt = tmp_path / "plain.json"
    assert run_plain([script, "--steps", str(HEAVY_STEPS), "--ground-truth", str(plain_gt)], env=env).returncode == 0
    # WHEN the same run is profiled with the default detail (shapes sampled
    # at 5 % in every window, new signatures arriving over the whole run)
    out = str(tmp_path / "out")
    tn_gt = tmp_path / "tn.json"
    r = run_tool(["-o", out, script, "--steps", str(HEAVY_STEPS), "--ground-truth", str(tn_gt)], env=env)
    assert r.returncode == 0, r.stderr
    prof = load_profile(out)
    assert any(o.get("shapes") for o in prof["ops"]), "no shape was sampled: the test would not test them"
    # THEN its peak is within torchneck's fixed cost of the plain run's
    plain_peak = json.loads(plain_gt.read_text())["loop_rusage"]["peak_rss_mb"]
    tn_peak = json.loads(tn_gt.read_text())["loop_rusage"]["peak_rss_mb"]
    assert tn_peak <= plain_peak + MAX_EXTRA_PEAK_MB, (tn_peak, plain_peak)


# growing_history slowing down only from step 250 of 600, in a timeline of
# 3,000 events a thread: it ended at step 119 (Debian 12) and 173 (Debian
# 13), the windows filling 3/4 of it, the light steps (~6 events each) the
# rest. Growing from step 350, the flat first 58 % of the steps held step
# time's rank correlation with the step index at 0.72-0.76 (step_time_drift
# asks 0.7), and one Debian 12 run fell below it; from 250 the script's own
# steps give ~0.9.
LATE_STEPS, GROW_FROM, SMALL_TIMELINE = 600, 250, 3000


def test_the_steps_after_the_timeline_are_read_from_the_step_clocks(tmp_path):
    out, truth = str(tmp_path / "out"), str(tmp_path / "truth.json")
    r = run_tool(["-o", out, "--timeline-events", str(SMALL_TIMELINE), script(os.path.join("loops", "growing_history.py")),
                  "--steps", str(LATE_STEPS), "--grow-from", str(GROW_FROM), "--truth", truth])
    assert r.returncode == 0, r.stderr[-3000:]
    prof = load_profile(out)
    with open(truth) as f:
        t = json.load(f)
    rows, waits = t["per_step_s"]["step"], t["per_step_s"]["data_wait"]
    s = prof["steps"]
    # The timeline ends before the steps grow: what it holds is flat.
    assert s["timeline_truncated"] and s["in_window"] < GROW_FROM, (s["in_window"], prof["notes"])
    assert s["count"] == t["steps"] == LATE_STEPS
    w = s["whole_run"]
    assert w is not None and w["source"] == "step_clocks", s
    assert w["last_step"] == LATE_STEPS
    # The steps after the timeline (first+1 .. last, rows first..), and the
    # whole run from its first clock: their mean step and data wait as the
    # script's own clock measured them over the same steps. Its rows end
    # where optimizer.step returns, ours where its scope ends: the same
    # boundaries, a few microseconds apart.
    b = w["beyond_first_step"]
    assert s["in_window"] <= b < GROW_FROM and w["beyond_steps"] == LATE_STEPS - b, w
    mean_ms = lambda v: 1e3 * statistics.mean(v)
    assert w["beyond_step_ms"] == pytest.approx(mean_ms(rows[b:]), rel=0.03), w
    assert w["beyond_data_ms"] == pytest.approx(mean_ms(waits[b:]), rel=0.25, abs=0.05), w
    a = w["first_step"]
    assert w["step_ms"] == pytest.approx(mean_ms(rows[a:]), rel=0.03), w
    assert w["data_ms"] == pytest.approx(mean_ms(waits[a:]), rel=0.25, abs=0.05), w
    # The drift the steps in the timeline cannot show, over the whole run:
    # each step's time by the clocks (600 boundaries, none thinned), from
    # the timeline's first steady step, as the script's clock shows its
    # thirds over the same steps.
    drift = {f["id"]: f for f in prof["findings"]}.get("step_time_drift")
    assert drift is not None, [f["id"] for f in prof["findings"]]
    assert "step clocks" in drift["evidence"][0], drift["evidence"]
    first = next(i for i, x in enumerate(s["per_step"]) if x["steady"])
    own = rows[first:]
    k = len(own) // 3
    growth = 100 * (statistics.median(own[-k:]) / statistics.median(own[:k]) - 1)
    assert growth > 50, growth  # what the script planted, by its own clock
    assert drift["growth_pct"] == pytest.approx(growth, rel=0.1), (drift, growth)
