"""Diagnosis accuracy against ground truth the examples measure about
themselves (time.perf_counter around next(loader), forward, backward, step)
in the same run, and against truths known by construction."""

import json
import os

import pytest

from conftest import ROOT, contended, load_profile, own_growth, run_tool, script, truth_share

EXAMPLES = os.path.join(ROOT, "examples")
# input_bound's lines (docs/findings.md): a finding from 25 % of the step
# waiting for data, high from 50 %; and how far our data share may be from
# the script's own (the tests below): near a line, either side is right.
INPUT_BOUND_PCT, INPUT_BOUND_HIGH_PCT = 25.0, 50.0
DATA_TOLERANCE_PP = 5.0


def profile_example(name, tmp_path, *args):
    out = str(tmp_path / "out")
    truth_file = str(tmp_path / "truth.json")
    r = run_tool(["-o", out, os.path.join(EXAMPLES, name + ".py"), "--ground-truth", truth_file, *args])
    assert r.returncode == 0, r.stderr
    with open(truth_file) as f:
        truth = json.load(f)
    return load_profile(out), truth, r.stderr


def ids(profile):
    return {f["id"]: f for f in profile["findings"]}


@pytest.mark.parametrize("example", ["input_bound_sleep", "input_bound_python"])
def test_input_bound_examples(example, tmp_path):
    profile, truth, report = profile_example(example, tmp_path)
    assert profile["steps"]["count"] == truth["steps"]
    measured = profile["steps"]["breakdown_pct"]["data"]
    expected = 100 * truth_share(truth, profile, "data_wait")
    assert abs(measured - expected) <= DATA_TOLERANCE_PP, f"data share {measured:.1f} % vs the script's {expected:.1f} %"
    # The examples plant a wait of over half the step on free cores; beside
    # other work their compute slows more than their loading, so the
    # finding's severity follows the share the script's own clock measured.
    # Near input_bound's line (the script's 29.4 % once beside busy loops in
    # Debian 13) either verdict is right: only the share is held there.
    if expected < INPUT_BOUND_PCT + DATA_TOLERANCE_PP:
        return
    found = ids(profile)
    assert "input_bound" in found
    severity = found["input_bound"]["severity"]
    if expected >= INPUT_BOUND_HIGH_PCT + DATA_TOLERANCE_PP:
        assert severity == "high"
    elif expected < INPUT_BOUND_HIGH_PCT - DATA_TOLERANCE_PP:
        assert severity == "medium"
    assert "num_workers=" in found["input_bound"]["recommendation"]
    assert found["input_bound"]["estimated_gain_pct"] > 0
    # the verdict comes first and names the bottleneck
    if severity == "high":
        assert report.index("VERDICT: Input-bound") < report.index("Step time")
        assert profile["verdict"].startswith("Input-bound")


def test_python_preprocessing_names_the_transform(tmp_path):
    profile, truth, _ = profile_example("input_bound_python", tmp_path)
    found = ids(profile)
    assert "slow_data_transform" in found
    # the planted preprocessing lives in the example's own functions
    assert "input_bound_python.py" in found["slow_data_transform"]["title"]


def test_heavy_linear_is_the_top_layer(tmp_path):
    profile, truth, _ = profile_example("heavy_linear", tmp_path)
    assert profile["steps"]["count"] == truth["steps"]
    leaves = [l for l in profile["layers"] if l["leaf"]]
    top = max(leaves, key=lambda l: l["forward_ms"] + l["backward_ms"])
    found = ids(profile)
    assert "input_bound" not in found
    # fc on top, heavy_layer and its verdict where the run had its cores:
    # beside other work the waits for a CPU land on every layer, and fc's
    # share of the model came under the 40 % line once, conv2 over fc once
    # (Debian 13's two intra-op threads beside busy loops, the loop waiting
    # 49 %); if heavy_layer fires there, it names fc.
    if not contended(profile):
        assert (top["name"], top["params"]) == (truth["layer"]["name"], truth["layer"]["params"])
        assert "heavy_layer" in found
        assert profile["verdict"].startswith("Layer " + truth["layer"]["name"])
    if "heavy_layer" in found:
        assert truth["layer"]["name"] in found["heavy_layer"]["title"], found["heavy_layer"]


def test_tiny_ops_is_framework_overhead(tmp_path):
    profile, truth, _ = profile_example("tiny_ops", tmp_path)
    assert profile["steps"]["count"] == truth["steps"]
    found = ids(profile)
    assert "framework_overhead" in found
    # Its loader is cheap, but on a busy machine it can come near the line:
    # named only where the script's own clock is near it or above.
    own = 100 * truth_share(truth, profile, "data_wait")
    assert "input_bound" not in found or own >= INPUT_BOUND_PCT - DATA_TOLERANCE_PP, (own, found["input_bound"])
    # by construction the script runs hundreds of torch-level ops per step;
    # the dispatcher sees at least as many
    assert profile["steps"]["ops_per_step"] >= truth["ops"]["forward_user_ops_per_step"]


def test_balanced_cnn_has_no_high_severity_finding(tmp_path):
    profile, truth, _ = profile_example("cnn", tmp_path)
    assert profile["steps"]["count"] == truth["steps"]
    high = [f for f in profile["findings"] if f["severity"] == "high"]
    # A machine that slows down mid-run (2 shared cores) slows the script's
    # own clock as much: a drift that clock shows is what the run did, not a
    # false verdict. Its thirds, as step_time_drift reads them, by the script.
    drift = [f for f in high if f["id"] == "step_time_drift"]
    if drift:
        grown = own_growth(profile, truth)
        assert grown >= 0.4, (drift, grown)
        high.remove(drift[0])
    assert not high, profile["findings"]


def test_breakdown_sums_to_the_step(tmp_path):
    profile, _, _ = profile_example("input_bound_sleep", tmp_path, "--steps", "20")
    s = profile["steps"]
    assert abs(sum(s["breakdown_ms"].values()) - s["step_ms"]) < 1e-3
    assert abs(sum(s["breakdown_pct"].values()) - 100) < 1e-3
    # the step time is every steady step's whole time over their number
    steady = [step["ms"] for step in s["per_step"] if step["steady"]]
    assert abs(s["step_ms"] - sum(steady) / len(steady)) < 1e-3
    for step in s["per_step"]:
        assert abs(sum(step["breakdown_ms"].values()) - step["ms"]) < 1e-3


@pytest.mark.parametrize("name,iters,source", [("gan_loop.py", 12, "optimizer"),
                                               ("manual_sgd.py", 15, "backward")])
def test_step_count_equals_iterations(name, iters, source, tmp_path):
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, script(name), str(iters)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"iterations {iters}"
    steps = load_profile(out)["steps"]
    assert steps["source"] == source
    assert steps["count"] == iters


# How far big's share of the three layers' backward may sit from the share
# the script's hooks timed: the hooks' spans also hold big.wide's weight
# being accumulated (AccumulateGrad, no layer's), and the hooks' own calls.
BACKWARD_SHARE_TOLERANCE = 0.10


def test_backward_goes_to_the_layer_that_costs_it(tmp_path):
    out, truth_path = str(tmp_path / "out"), tmp_path / "truth.json"
    assert run_tool(["--detail=full", "-o", out, script("backward_truth.py"), "--truth", str(truth_path)]).returncode == 0
    timed = json.loads(truth_path.read_text())["backward_ms"]
    layers = {l["name"]: l for l in load_profile(out)["layers"]}
    # leaves: small1, big.wide, small2; `big` also owns its view/sum ops
    own = {name: layers[name]["backward_ms"] for name in timed}
    # THEN big's share of their backward is the share the script timed
    share, timed_share = own["big"] / sum(own.values()), timed["big"] / sum(timed.values())
    assert abs(share - timed_share) <= BACKWARD_SHARE_TOLERANCE, (own, timed)
    assert layers["big.wide"]["backward_ms"] <= layers["big"]["backward_ms"]
    assert layers["Net"]["backward_ms"] >= sum(own.values()) - 1e-6
