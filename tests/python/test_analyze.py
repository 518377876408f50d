"""`torchneck analyze` of real GPU traces (issue 4), against oracles the
test reads itself: the TensorBoard plugin's expected output for the V100
ResNet-50 trace (its step breakdown, GPU summary and recommendation), the
trace's own rank metadata, and one-line errors for bad input."""

import gzip
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, TOOL, load_profile

pytestmark = pytest.mark.native_only

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
V100 = os.path.join(FIXTURES, "v100_resnet50_num_workers_0.trace.json.gz")
PLUGIN = os.path.join(FIXTURES, "tbplugin_resnet50_num_workers_0.expected.jsonl")
CATEGORIES = ["Kernel", "Memcpy", "Memset", "Runtime", "DataLoader", "CPU Exec", "Other"]


def analyze(args, **kw):
    return subprocess.run([TOOL, "analyze", *args], capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def v100(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("v100") / "out")
    r = analyze(["-o", out, V100])
    assert r.returncode == 0, r.stderr
    return r, load_profile(out)


@pytest.fixture(scope="module")
def plugin():
    with open(PLUGIN) as f:
        return json.loads(f.readline())


def test_step_breakdown_equals_the_tensorboard_plugin(v100, plugin):
    _, prof = v100
    ours = {s["step"]: s for s in prof["gpu"]["step_breakdown"]}
    names = [c["name"] for c in plugin["steps"]["columns"] if c.get("type") == "number"]
    rows = plugin["steps"]["rows"]
    assert len(rows) == 6 and sorted(ours) == sorted(r[0] for r in rows)
    for row in rows:
        values = [v for v in row[1:] if not isinstance(v, str)]
        for name, want in zip(names, values):
            got = ours[row[0]][name]
            assert got == pytest.approx(want, rel=0.01, abs=1.0), (row[0], name, got, want)


def test_gpu_summary_equals_the_plugin(v100, plugin):
    _, prof = v100
    summary = {d["title"]: d["value"] for d in plugin["gpu_metrics"]["data"]}
    pct = lambda s: float(s.rstrip(" %"))  # noqa: E731
    assert 100 * prof["gpu"]["utilization"] == pytest.approx(pct(summary["GPU Utilization"]), abs=0.01)
    assert 100 * prof["gpu"]["sm_efficiency"] == pytest.approx(pct(summary["Est. SM Efficiency"]), abs=0.01)
    assert prof["gpu"]["achieved_occupancy"] == pytest.approx(pct(summary["Est. Achieved Occupancy"]), abs=0.01)
    assert prof["gpu"]["device"] == summary["Name"]


def test_verdict_is_input_bound_as_the_plugin_concluded(v100, plugin):
    r, prof = v100
    # the plugin's first recommendation: "33.4% of the step time is in DataLoader"
    share = float(re.search(r"([\d.]+)% of the step time is in DataLoader", plugin["recommendations"]).group(1))
    assert prof["verdict"].startswith("Input-bound")
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert lines[2].startswith("VERDICT: Input-bound"), lines[:3]  # verdict first, after the header
    f = next(f for f in prof["findings"] if f["id"] == "input_bound")
    assert f["severity"] == "high"
    assert f"{share:.1f} %" in f["title"]
    # the live-run schema: steps with their breakdown, data = the DataLoader share
    assert prof["steps"]["source"] == "profiler_step"
    assert prof["steps"]["breakdown_pct"]["data"] > 20


def test_top_kernels_sum_to_the_trace(v100):
    _, prof = v100
    with gzip.open(V100) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "Kernel"]
    by_name = {}
    for e in kernels:
        by_name[e["name"]] = by_name.get(e["name"], 0) + e["dur"]
    top = prof["gpu"]["top_kernels"][0]
    assert top["name"] == max(by_name, key=by_name.get)
    assert top["total_us"] == pytest.approx(by_name[top["name"]], rel=1e-6)
    assert top["calls"] == sum(1 for e in kernels if e["name"] == top["name"])


def test_a_folder_of_ranks_is_one_run(tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        name = f"sampled_rank{r}_of128.trace.json.gz"
        os.symlink(os.path.join(FIXTURES, name), ranks / name)
    out = str(tmp_path / "out")
    r = analyze(["-o", out, str(ranks)])
    assert r.returncode == 0, r.stderr
    prof = load_profile(out)
    assert [x["rank"] for x in prof["ranks"]] == [0, 1]
    assert prof["gpu"]["rank"] == 0
    # Each rank's GPU report beside its summary (test_analyze_ranks.py checks the comparison).
    assert [x["gpu"]["rank"] for x in prof["ranks"]] == [0, 1]


@pytest.mark.parametrize("case", ["empty", "not_json", "truncated_json", "truncated_gz", "wrong_schema", "nested",
                                  "huge_number", "missing", "bad_option"])
def test_bad_input_is_one_line_exit_2(case, tmp_path):
    bad = tmp_path / "bad.json"
    args = None
    if case == "empty":
        bad.write_text("")
    elif case == "not_json":
        bad.write_text("this is not json\n")
    elif case == "truncated_json":
        with gzip.open(V100, "rb") as f:
            bad.write_bytes(f.read()[:100000])
    elif case == "truncated_gz":
        bad = tmp_path / "bad.json.gz"
        with open(V100, "rb") as f:
            bad.write_bytes(f.read()[:50000])
    elif case == "wrong_schema":
        bad.write_text('{"traceEvents": {"not": "an array"}}')
    elif case == "nested":
        bad.write_text('{"traceEvents": ' + "[" * 100000 + "]" * 100000 + "}")
    elif case == "huge_number":
        bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e400, "dur": 1}]}')
    elif case == "missing":
        bad = tmp_path / "nope.json"
    else:
        args = ["--bogus", str(bad)]
    out = tmp_path / "out"
    r = analyze(args or ["-o", str(out), str(bad)])
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchneck: "), r.stderr
    if args is None and case != "missing":
        assert str(bad) in lines[0]
        assert not out.exists()  # nothing half-written


def _hta_cases():
    with open(os.path.join(FIXTURES, "hta_expected.json")) as f:
        expected = json.load(f)
    return [(k, v) for k, v in expected.items() if k != "_about" and "temporal_breakdown" in v]


@pytest.mark.parametrize("name,hta", _hta_cases(), ids=[k for k, _ in _hta_cases()])
def test_gpu_breakdowns_equal_holistic_trace_analysis(name, hta, tmp_path):
    out = str(tmp_path / "out")
    r = analyze(["-o", out, os.path.join(FIXTURES, name)])
    assert r.returncode == 0, r.stderr
    gpu = load_profile(out)["gpu"]
    want = hta["temporal_breakdown"][0]
    got = gpu["temporal_breakdown"]
    for k in ("idle_time", "compute_time", "non_compute_time", "kernel_time"):
        assert got[k + "_us"] == pytest.approx(want[k + "(us)"], rel=0.005, abs=1), k
    for k in ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"):
        assert got[k] == pytest.approx(want[k], abs=0.5), k
    if "idle_time_breakdown" in hta:
        ours = {s["stream"]: s for s in gpu["idle_breakdown"]}
        for row in hta["idle_time_breakdown"]:
            s = ours[row["stream"]]
            assert s[row["idle_category"] + "_us"] == pytest.approx(row["idle_time"], rel=0.005, abs=1), row
            if row["idle_time_ratio"] == row["idle_time_ratio"]:  # not NaN
                assert 100 * s[row["idle_category"] + "_ratio"] == pytest.approx(100 * row["idle_time_ratio"], abs=0.5)
    if "kernel_type_breakdown" in hta:
        ours = {k["kernel_type"]: k for k in gpu["kernel_breakdown"]}
        for row in hta["kernel_type_breakdown"]:
            k = ours[row["kernel_type"]]
            assert k["sum_us"] == pytest.approx(row["sum"], rel=0.005, abs=1), row
            assert k["percentage"] == pytest.approx(row["percentage"], abs=0.5), row
