"""Detail windows (--detail=window, the default; docs/overhead.md) against
--detail=full on every bundled example: each run is compared with the
script's own clock in that same run (examples/ground_truth.py: five
perf_counter reads per step), and the window run's error must be within
2 percentage points of the full run's, phase by phase; steps are counted
exactly, and the top layer is the same."""

import json
import os

import pytest

from conftest import (ESTIMATED_PHASES, ROOT, contended, contention_stall_pp, load_profile, run_tool,
                      window_sampling_pp)

EXAMPLES = os.path.join(ROOT, "examples")
# Steps per example: enough that the windows close on the examples whose
# detail costs more than the budget (tiny_ops, cnn); tiny_ops runs two
# windows (one every ~125 steps), so that its estimate rests on ten
# detailed steps, not five, and its full run keeps every step's events
# (~4900 a step) in a larger timeline.
STEPS = {"input_bound_sleep": 40, "input_bound_python": 120, "heavy_linear": 30, "tiny_ops": 200, "cnn": 80}
EXTRA = {"tiny_ops": ["--timeline-events=1200000"]}
# The script's phase for each of ours.
PHASES = {"data": "data_wait", "forward": "forward", "backward": "backward", "optimizer": "optimizer"}
# Where one layer dominates by construction: the top leaf must not depend
# on the detail mode (tiny_ops has 48 identical blocks; cnn's top leaf
# changes between two full-detail runs already).
TOP_LAYER = ("heavy_linear",)
# Percentage points by which the window run's error may exceed the full
# run's, on every example; an estimated phase's also by what sampling its
# detailed steps may err by in that run (conftest.window_sampling_pp), and
# on a contended run by the stalls outside the windows (contention_stall_pp).
TOLERANCE_PP = 2.0


def profile(example, tmp_path, mode, steps=None, extra=None):
    out = str(tmp_path / mode)
    truth_file = str(tmp_path / f"truth-{mode}.json")
    extra = EXTRA.get(example, []) if extra is None else extra
    r = run_tool(["--detail=" + mode, *extra, "-o", out, os.path.join(EXAMPLES, example + ".py"),
                  "--steps", str(steps or STEPS[example]), "--ground-truth", truth_file])
    assert r.returncode == 0, r.stderr
    with open(truth_file) as f:
        truth = json.load(f)
    return load_profile(out), truth


def steady(p, truth):
    steps = p["steps"]["per_step"]
    assert len(steps) == len(truth["per_step_s"]["step"]), "step boundaries differ from the script's iterations"
    return [i for i, s in enumerate(steps) if s["steady"]]


def phase_errors(p, truth):
    """Our share of each phase minus the script's, in percentage points,
    over the steps we call steady."""
    per, keep = truth["per_step_s"], steady(p, truth)
    total = sum(per["step"][i] for i in keep)
    return {ours: p["steps"]["breakdown_pct"][ours] - 100 * sum(per[theirs][i] for i in keep) / total
            for ours, theirs in PHASES.items()}


def check_window_against_full(window, truth, full, full_truth):
    """The window run errs from its script's clock by what the full run
    errs from its own, within TOLERANCE_PP, and an estimated phase also
    within what sampling its detailed steps may err by."""
    e_full, e_window = phase_errors(full, full_truth), phase_errors(window, truth)
    keep = steady(window, truth)
    for phase in PHASES:
        allowed = TOLERANCE_PP
        if phase in ESTIMATED_PHASES:
            allowed += (window_sampling_pp(window, truth["per_step_s"], (PHASES[phase],), keep)
                        + contention_stall_pp(window, truth["per_step_s"], keep))
        assert abs(e_window[phase] - e_full[phase]) <= allowed, (
            f"{phase}: window {e_window[phase]:+.1f} pp from the script's clock, full {e_full[phase]:+.1f} pp, "
            f"allowed {allowed:.1f} pp")


def top_leaf(p):
    leaves = [l for l in p["layers"] if l["leaf"]]
    return max(leaves, key=lambda l: l["forward_ms"] + l["backward_ms"])["name"]


@pytest.mark.parametrize("example", sorted(STEPS))
def test_windowed_figures_match_full_detail_against_the_scripts_clock(example, tmp_path):
    full, full_truth = profile(example, tmp_path, "full")
    window, window_truth = profile(example, tmp_path, "window")
    assert full["steps"]["detail"] == "full" and window["steps"]["detail"] == "window"
    # Steps: every one counted and timed, in both.
    for p, truth in ((full, full_truth), (window, window_truth)):
        assert p["steps"]["count"] == truth["steps"] == STEPS[example]
    check_window_against_full(window, window_truth, full, full_truth)
    # The top layer, where both runs had their cores: beside other work each
    # layer's time holds its waits for a CPU, which land on whatever runs
    # then (heavy_linear's conv2 above its fc in one full run, Debian 13's
    # two intra-op threads beside busy loops).
    if example in TOP_LAYER and not (contended(full) or contended(window)):
        assert top_leaf(window) == top_leaf(full)
        if example == "heavy_linear":
            assert top_leaf(window) == window_truth["layer"]["name"]


def test_costly_detail_is_windowed_and_its_steps_estimated(tmp_path):
    # tiny_ops' detail costs far more than the 2 % budget: after the first
    # window, only some steps are detailed, the others estimated. (The
    # policy measures that cost on three light steps: on a machine whose
    # steps vary as much as the detail costs, seen once in the torch 2.6
    # environment, it may keep detail on after them; the light probe steps
    # are estimated either way.)
    window, truth = profile("tiny_ops", tmp_path, "window", steps=400)
    s = window["steps"]
    assert s["count"] == truth["steps"]
    assert 3 <= s["estimated_steps"] < s["count"]
    detailed = [st for st in s["per_step"] if st["detailed"]]
    assert len(detailed) + s["estimated_steps"] == s["in_window"]
    # The estimate rests on the detailed steps past warm-up (on a busy
    # machine the warm-up can take all but two of the first window's seven;
    # the precision that leaves is test_windowed_figures_...'s allowance).
    learnt = [st for st in detailed if st["steady"] or st["detail_excluded"]]
    assert s["detailed_steady"] == len(learnt) >= 1
    # the operator counts per step are the detailed steps', not diluted by
    # the undetailed ones
    assert s["ops_per_step"] > 1000


def test_windows_leave_the_light_steps_room_in_the_timeline(tmp_path):
    # A timeline of 40,000 events fills in tiny_ops' first window (~4,900
    # events a detailed step, ~5 a light one). The window closes once 3/4
    # of it is used, none opens again, and the rest keeps every later
    # step's light scopes: all 300 steps counted, timed and split as the
    # full run (every step detailed, in a timeline that holds them all)
    # splits them, against the scripts' own clocks. Before, the light
    # steps after the full timeline were lost: their step times, the
    # breakdown's and slow steps' evidence.
    window, truth = profile("tiny_ops", tmp_path, "window", steps=300, extra=["--timeline-events=40000"])
    full, full_truth = profile("tiny_ops", tmp_path, "full", steps=300, extra=["--timeline-events=2000000"])
    assert full["dropped_events"] == 0, "the reference run lost events: nothing to compare"
    assert any(n.startswith("detail windows: none opened after step") for n in window["notes"]), window["notes"]
    s = window["steps"]
    assert s["count"] == s["in_window"] == truth["steps"] == 300 and not s["timeline_truncated"]
    assert window["dropped_events"] == 0
    assert s["detailed_steady"] >= 1
    check_window_against_full(window, truth, full, full_truth)


# The windows' period follows the measured cost, which a busy machine
# measures higher and noisier: beside busy loops none reopened in 600 steps
# (conftest.contended).


@pytest.mark.quiet_machine
def test_without_a_timeline_the_windows_go_on_feeding_the_aggregates(tmp_path):
    # --timeline-events=0 keeps aggregates only: there is no room to keep,
    # so the windows reopen as the policy says and the operator tables
    # cover them all, not only the first (a 40,000-event timeline stops
    # them within it). tiny_ops' windows reopen every ~150 steps or more (6
    # steps of +50-65 %, sized to a 2 % budget by the measured cost's upper
    # bound): in 400 steps on Debian 13, 1 run of 25 reopened once instead
    # of twice, and this pair of tests failed once in ~46 runs, unexplained;
    # 600 steps leave room for a period of up to ~590.
    def top_calls(mode_dir, events):
        out = str(tmp_path / mode_dir)
        r = run_tool(["--detail=window", f"--timeline-events={events}", "-o", out,
                      os.path.join(EXAMPLES, "tiny_ops.py"), "--steps", "600"])
        assert r.returncode == 0, r.stderr
        p = load_profile(out)
        ops = [o for o in p["ops"] if o["kind"] == "operator"]
        return max(o["calls"] for o in ops), p["notes"], contended(p)
    none, none_notes, none_busy = top_calls("none", 0)
    small, small_notes, small_busy = top_calls("small", 40000)
    assert any(n.startswith("detail windows: none opened") for n in small_notes), small_notes
    if none_busy or small_busy:
        return  # the policy's quiet-machine period is not this run's premise
    assert not any(n.startswith("detail windows: none opened") for n in none_notes), none_notes
    assert none > 1.3 * small, (none, small)


def test_module_hooks_are_registered_only_for_detailed_steps(tmp_path):
    # Between windows the global module hooks are removed (they would send
    # every module call down nn.Module._call_impl's slow path): the script
    # reads torch's own hook dict before each forward.
    seen = tmp_path / "hooks.json"
    out = str(tmp_path / "o")
    r = run_tool(["--detail=window", "-o", out, os.path.join(ROOT, "tests", "python", "scripts", "detail_hooks.py"),
                  str(seen), "400"])
    assert r.returncode == 0, r.stderr
    hooks = json.loads(seen.read_text())
    detailed = [st["detailed"] for st in load_profile(out)["steps"]["per_step"]]
    assert len(hooks) == len(detailed) == 400
    assert 0 < sum(detailed) < 400, "the windows did not close: nothing to compare"
    assert [n > 0 for n in hooks] == detailed


def test_no_recordfunction_callback_between_windows_and_every_python_scope_recorded(tmp_path):
    # Between windows no RecordFunction callback is registered (any costs
    # ~2 % of a small-op step): Python's record_function scopes (torch's
    # optimizer and DataLoader scopes are of that class) are recorded by
    # the wrapped class in every step, and a scope made in C++ (torch's
    # profiler op called directly, as C++ code and TorchScript do) only in
    # the detailed steps. The script opens one of each per step.
    out = str(tmp_path / "o")
    r = run_tool(["--detail=window", "-o", out, os.path.join(ROOT, "tests", "python", "scripts", "detail_hooks.py"),
                  str(tmp_path / "hooks.json"), "400"])
    assert r.returncode == 0, r.stderr
    p = load_profile(out)
    detailed = sum(st["detailed"] for st in p["steps"]["per_step"])
    assert p["steps"]["count"] == 400 and 0 < detailed < 400, "the windows did not close: nothing to compare"
    calls = {o["name"]: o["calls"] for o in p["ops"] if o["kind"] == "user_scope"}
    assert calls["detail_hooks.step"] == calls["Optimizer.step#SGD.step"] == 400
    assert calls["Optimizer.zero_grad#SGD.zero_grad"] == 400
    assert calls["detail_hooks.native"] == detailed


def test_detail_needs_the_operator_observer(tmp_path):
    r = run_tool(["--no-ops", "--detail=full", "-o", str(tmp_path / "o"), os.path.join(EXAMPLES, "tiny_ops.py")])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "--detail conflicts with --no-ops" in r.stderr
    r = run_tool(["--detail=some", "-o", str(tmp_path / "o"), os.path.join(EXAMPLES, "tiny_ops.py")])
    assert r.returncode == 2 and "--detail must be auto, window or full" in r.stderr
