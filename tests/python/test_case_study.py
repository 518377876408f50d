"""The seed article's case study (examples/seed_case_study.py,
docs/case-study.md) walked as a user would: run with --try auto, apply the
fixes (--fixed), diff. Against the example's own clock in the same runs:
the --try measurement and the diff's change."""

import json
import os
import subprocess

from conftest import ROOT, contended, load_profile, run_tool, truth_share

EXAMPLE = os.path.join(ROOT, "examples", "seed_case_study.py")
TOOL = os.path.join(ROOT, "torchneck")


# A gain the script's own clock shows clearly (twice the runs' ~4 % jitter,
# docs/diff.md); a phase that moved clearly most: 1.5 times the next one.
CLEAR_GAIN_PCT, CLEAR_LEAD = 8.0, 1.5
# input_bound's line (docs/findings.md) and the data share's tolerance.
INPUT_BOUND_PCT, DATA_TOLERANCE_PP = 25.0, 5.0
# The script's phases (examples/ground_truth.py) by the profile's names.
OWN_PHASES = {"data_wait": "data", "forward": "forward", "backward": "backward", "optimizer": "optimizer"}


def own_phase_deltas_ms(before, after):
    """Each phase's change of its mean over the steady steps, in ms, by the
    script's own clock: {profile phase name: after - before}."""
    means = []
    for truth_file, profile in (before, after):
        with open(truth_file) as f:
            per = json.load(f)["per_step_s"]
        keep = [i for i, s in enumerate(profile["steps"]["per_step"]) if s["steady"] and not s["gpu_window"]]
        means.append({name: 1e3 * sum(per[k][i] for i in keep) / len(keep) for k, name in OWN_PHASES.items()})
    return {name: means[1][name] - means[0][name] for name in OWN_PHASES.values()}


def own_mean_ms(truth, profile):
    per_step = profile["steps"]["per_step"]
    rows = truth["per_step_s"]["step"]
    assert len(rows) == len(per_step), (len(rows), len(per_step))
    keep = [i for i, s in enumerate(per_step) if s["steady"] and not s["gpu_window"]]
    return 1e3 * sum(rows[i] for i in keep) / len(keep)


def test_run_try_fix_diff(tmp_path):
    before, after = str(tmp_path / "before"), str(tmp_path / "after")
    tb, ta = str(tmp_path / "tb.json"), str(tmp_path / "ta.json")
    r = run_tool(["-o", before, "--try", "auto", "--try-steps", "15", EXAMPLE, "--steps", "40",
                  "--ground-truth", tb], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    pb = load_profile(before)
    found = {f["id"]: f for f in pb["findings"]}
    # Problem 2, the fc layer: the top layer. On free cores it holds over
    # half the model's time; beside other work the waits for a CPU land on
    # every layer and bring it near heavy_layer's 40 % line (43 % and under
    # 40 % in two runs here), where either verdict is right.
    leaves = [l for l in pb["layers"] if l["leaf"]]
    assert max(leaves, key=lambda l: l["forward_ms"] + l["backward_ms"])["name"] == "fc", leaves
    if not contended(pb):
        assert "heavy_layer" in found
    if "heavy_layer" in found:
        assert "fc" in found["heavy_layer"]["title"], found["heavy_layer"]
    # --try auto measured the workers the finding suggests, and the finding
    # follows the measurement. On free cores the workers hide the loading
    # (+51 % measured here); beside other work they also take CPU from the
    # step, so there only the finding's following its measurement is held.
    [e] = [e for e in pb["experiments"] if e["finding"] == "input_bound"]
    assert e["state"] == "measured", e
    if not contended(pb):
        assert e["outcome"] == "gain" and e["measured_gain_pct"] > 20, e
    demoted = e["outcome"] in ("no_gain", "slower")
    assert (found["input_bound"]["severity"] == "low") == demoted, (found["input_bound"], e)
    assert any(x.startswith("measured with --try num_workers=") for x in found["input_bound"]["evidence"])
    # The verdict: input-bound first (problem 1), unless its measurement on
    # this machine demoted it
    if not demoted:
        assert pb["findings"][0]["id"] == "input_bound", [f["id"] for f in pb["findings"]]
    r = run_tool(["-o", after, EXAMPLE, "--steps", "40", "--fixed", "--ground-truth", ta], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    d = subprocess.run([TOOL, "diff", "-o", str(tmp_path / "diff"), before, after], capture_output=True, text=True,
                       timeout=120)
    assert d.returncode == 0, d.stderr
    with open(tmp_path / "diff" / "diff.json") as f:
        diff = json.load(f)
    with open(tb) as f1, open(ta) as f2:
        own = 100 * (own_mean_ms(json.load(f2), load_profile(after)) / own_mean_ms(json.load(f1), pb) - 1)
    low, high = diff["ci95_pct"]
    assert low - 1 <= own <= high + 1, (own, diff["step_change_pct"], diff["ci95_pct"])
    # The fixes' gain by the script's own clock: over 30 % on free cores;
    # beside other work the workers take CPU from the step too. The diff
    # calls it significant where the script's clock shows a clear gain.
    if own < -CLEAR_GAIN_PCT:
        assert diff["significant"] and diff["step_change_pct"] < 0, (own, diff["step_change_pct"])
    # The phase that moved most is the one the script's own clock says
    # moved most, where it clearly did (the loading, on free cores).
    moved = own_phase_deltas_ms((tb, pb), (ta, load_profile(after)))
    first, second = sorted(moved.values(), key=abs, reverse=True)[:2]
    if abs(first) >= CLEAR_LEAD * abs(second):
        [name] = [k for k, v in moved.items() if v == first]
        assert diff["phases"][0]["name"] == name, (moved, diff["phases"])
    # The layer that gained most is fc, the one the fix changed (512 -> 256
    # units). Not the one that moved most: on 2 cores the fixed run's two
    # DataLoader workers take CPU from the main thread's compute, and conv2,
    # unchanged, got slower by as much as fc got faster once in Debian 13
    # (Debian 12 by hand: conv2 3.1 -> 8.8 ms a step, fc 41.4 -> 28.6).
    assert min(diff["layers"], key=lambda l: l["delta_ms"])["name"] == "fc", diff["layers"]
    # input_bound resolved where the fixed run's own clock puts its wait
    # under the finding's line (25 %, 5 points either side are right), and
    # it was serious before (diff compares medium and high findings).
    with open(ta) as f:
        own_after = 100 * truth_share(json.load(f), load_profile(after), "data_wait")
    if own_after < INPUT_BOUND_PCT - DATA_TOLERANCE_PP and not demoted:
        assert "input_bound" in diff["findings"]["resolved"], (own_after, diff["findings"])
        [detail] = [x for x in diff["findings"]["details"] if x["id"] == "input_bound"]
        assert detail["try_change_pct"] == -e["measured_gain_pct"]
