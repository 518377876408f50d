"""The seed article's case study (examples/seed_case_study.py,
docs/case-study.md) walked as a user would: run with --try auto, apply the
fixes (--fixed), diff. Against the example's own clock in the same runs:
the --try measurement and the diff's change."""

import json
import os
import subprocess

from conftest import ROOT, load_profile, run_tool

EXAMPLE = os.path.join(ROOT, "examples", "seed_case_study.py")
TOOL = os.path.join(ROOT, "torchneck")


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
    # The verdict: input-bound first, the fc layer next (problems 1 and 2)
    assert pb["findings"][0]["id"] == "input_bound", [f["id"] for f in pb["findings"]]
    assert "heavy_layer" in found and "fc" in found["heavy_layer"]["title"]
    # --try auto measured the workers the finding suggests, and found a gain
    [e] = [e for e in pb["experiments"] if e["finding"] == "input_bound"]
    assert e["state"] == "measured" and e["significant"] and e["measured_gain_pct"] > 20, e
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
    assert diff["significant"] and diff["step_change_pct"] < -30
    # The layer that gained most is fc, the one the fix changed (512 -> 256
    # units). Not the one that moved most: on 2 cores the fixed run's two
    # DataLoader workers take CPU from the main thread's compute, and conv2,
    # unchanged, got slower by as much as fc got faster once in Debian 13
    # (Debian 12 by hand: conv2 3.1 -> 8.8 ms a step, fc 41.4 -> 28.6).
    assert diff["phases"][0]["name"] == "data"
    assert min(diff["layers"], key=lambda l: l["delta_ms"])["name"] == "fc", diff["layers"]
    assert "input_bound" in diff["findings"]["resolved"]
    [detail] = [x for x in diff["findings"]["details"] if x["id"] == "input_bound"]
    assert detail["try_change_pct"] == -e["measured_gain_pct"]
