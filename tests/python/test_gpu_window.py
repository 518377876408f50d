"""The GPU window of `torchneck run` (--gpu, --gpu-steps;
python/torchneck/gpu_window.py): on these machines there is no GPU, so
the window is exercised with CPU activity only (--gpu=on), where torch has
Kineto (torch 2.x: the Debian 13 half of the suite); the rest of the
contract (no GPU: one line; --gpu=off; a torch without Kineto) on any
torch. Truth: the scripts' own clocks and their own torch.profiler in the
same run, and the Kineto trace the window wrote, read here with json."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TOOL, load_profile, run_plain, run_tool, script

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import gpu_window  # noqa: E402 - its constants; imports no torch

try:
    import torch.profiler as _tp
    KINETO = bool(getattr(_tp, "kineto_available", lambda: False)())
except Exception:  # noqa: BLE001
    KINETO = False
try:
    import torch
    CUDA = bool(torch.cuda.is_available())
except Exception:  # noqa: BLE001
    CUDA = False

needs_kineto = pytest.mark.skipif(not KINETO, reason="this torch has no Kineto (Debian 12's 1.13): the Debian 13 half runs it")


def run_loop(tmp_path, *args, name="uniform_clean"):
    out = str(tmp_path / "out")
    truth_path = str(tmp_path / "truth.json")
    r = run_tool([*args, "-o", out, script(os.path.join("loops", name + ".py")), "--truth", truth_path], timeout=240)
    assert r.returncode == 0, r.stderr[-4000:]
    with open(truth_path) as f:
        truth = json.load(f)
    return load_profile(out), truth, r.stdout + r.stderr, out


@pytest.mark.skipif(CUDA, reason="a CUDA machine: the window is recorded there (scripts/gpu-check)")
def test_a_cpu_only_run_says_so_in_one_line(tmp_path):
    profile, truth, report, _ = run_loop(tmp_path)
    lines = [l for l in report.splitlines() if l.startswith("GPU")]
    assert lines == ["GPU: none (torch.cuda.is_available() is False): no GPU collection"], lines
    assert profile["gpu_window"]["state"] == "no_gpu"
    assert "gpu" not in profile
    assert profile["steps"]["gpu_window_steps"] == 0
    assert all(l["gpu_forward_ms"] is None for l in profile["layers"])
    assert not os.path.exists(os.path.join(str(tmp_path / "out"), "gpu"))


def test_gpu_off_skips_it(tmp_path):
    profile, _, report, out = run_loop(tmp_path, "--gpu=off")
    assert profile["gpu_window"]["state"] == "off"
    assert "GPU: not collected (--gpu=off)" in report
    assert not os.path.exists(os.path.join(out, "gpu"))


def test_a_bad_gpu_mode_is_one_line(tmp_path):
    r = run_tool(["--gpu=maybe", "-o", str(tmp_path / "out"), script("deterministic.py")])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == "torchneck: --gpu must be auto, on or off, not 'maybe'", r.stderr


@pytest.mark.skipif(KINETO, reason="this torch has Kineto")
def test_without_kineto_the_window_says_why_and_the_report_stands(tmp_path):
    profile, truth, report, _ = run_loop(tmp_path, "--gpu=on")
    w = profile["gpu_window"]
    assert w["state"] == "unavailable" and "without Kineto" in w["note"], w
    assert profile["steps"]["count"] == truth["steps"]
    assert f"GPU window: {w['note']}" in report


@needs_kineto
def test_the_window_records_steady_steps_and_the_cpu_side_stays_right(tmp_path):
    profile, truth, report, out = run_loop(tmp_path, "--gpu=on", "--gpu-steps=4")
    w = profile["gpu_window"]
    assert w["state"] == "recorded", w
    assert w["activities"] == ["cpu"]
    assert w["first_step"] >= 2 and w["last_step"] - w["first_step"] + 1 == 4, w
    # The window's steps, and only they, leave the CPU-side statistics
    # (per_step is 0-based, the window's steps 1-based).
    per_step = profile["steps"]["per_step"]
    in_window = [i + 1 for i, s in enumerate(per_step) if s["gpu_window"]]
    assert in_window == list(range(w["first_step"], w["last_step"] + 1)), (in_window, w)
    assert profile["steps"]["gpu_window_steps"] == 4
    # Detail windows go on around it (docs/overhead.md), the detail held on
    # through the window: every one of its steps is detailed
    assert profile["steps"]["detail"] == "window"
    assert all(per_step[i - 1]["detailed"] for i in in_window), per_step
    assert "1 warm-up and 4 of the GPU window left out" in report
    # The CPU side against the script's own clock in the same run.
    assert profile["steps"]["count"] == truth["steps"]
    keep = [i for i, s in enumerate(per_step) if s["steady"]]
    per = truth["per_step_s"]
    own = 100 * sum(per["data_wait"][i] for i in keep) / sum(per["step"][i] for i in keep)
    assert abs(profile["steps"]["breakdown_pct"]["data"] - own) <= 5.0, (profile["steps"]["breakdown_pct"], own)
    # Kineto and our observer both recorded every operator of the window:
    # the clocks line up on them, to within a microsecond.
    assert w["aligned_ops"] >= 100, w
    assert abs(w["alignment_residual_us"]) < 1.0, w
    # The trace is Kineto's own, in the output folder; it has the window's
    # operators (the same addmm count as our timeline over its steps: the
    # model's 5 Linear layers per step, forward).
    with open(w["trace"]) as f:
        trace = json.load(f)
    assert os.path.dirname(w["trace"]) == os.path.join(out, "gpu")
    addmm = sum(1 for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm")
    assert addmm == 4 * truth["layers"], (addmm, truth["layers"])
    assert "gpu" not in profile  # CPU activity only: no device to analyse
    assert "CPU activity only: no device to analyse" in report


def kineto_ops(trace_path):
    with open(trace_path) as f:
        return sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op")


@needs_kineto
def test_without_gpu_steps_the_window_is_sized_by_its_events(tmp_path):
    # Kineto keeps ~2 KB per event until the run's end (docs/overhead.md):
    # without --gpu-steps, a model of many small operators (tiny_ops:
    # thousands a step) gets fewer steps, a light one all of the default's.
    # Truth: the operators Kineto itself recorded in the window.
    out = str(tmp_path / "tiny")
    r = run_tool(["--gpu=on", "-o", out, os.path.join(ROOT, "examples", "tiny_ops.py"), "--steps", "30"], timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    w = load_profile(out)["gpu_window"]
    assert w["state"] == "recorded", w
    steps = w["last_step"] - w["first_step"] + 1
    per_step = kineto_ops(w["trace"]) / steps
    # as many steps as the budget holds by Kineto's count (ours counts
    # user scopes too: a step's worth of slack either way)
    fit = gpu_window.WINDOW_EVENT_BUDGET / per_step
    assert steps < gpu_window.DEFAULT_STEPS and fit - 1 <= steps <= max(1, fit + 1), (steps, per_step, w)
    assert w["requested_steps"] == gpu_window.DEFAULT_STEPS
    assert w["note"].startswith(f"{steps} step") and f"not {gpu_window.DEFAULT_STEPS}" in w["note"], w
    assert w["note"] in r.stdout + r.stderr
    # A light loop: the whole default window, whose events fit the budget.
    profile, _, _, _ = run_loop(tmp_path, "--gpu=on")
    w = profile["gpu_window"]
    assert w["state"] == "recorded" and w["note"] == "", w
    assert w["last_step"] - w["first_step"] + 1 == gpu_window.DEFAULT_STEPS, w
    assert kineto_ops(w["trace"]) <= gpu_window.WINDOW_EVENT_BUDGET, w


@needs_kineto
def test_the_scripts_own_profiler_comes_first(tmp_path):
    # The script starts torch.profiler at step 7, inside the window (steps
    # 5.. on this loop): the window closes before, and the script's profiler
    # sees what it sees under plain Python.
    plain_truth, tool_truth = str(tmp_path / "plain.json"), str(tmp_path / "tool.json")
    p = run_plain([script("own_profiler_mid_run.py"), plain_truth])
    assert p.returncode == 0, p.stderr
    out = str(tmp_path / "out")
    r = run_tool(["--gpu=on", "-o", out, script("own_profiler_mid_run.py"), tool_truth])
    assert r.returncode == 0, r.stderr[-3000:]
    with open(plain_truth) as f, open(tool_truth) as g:
        assert json.load(f) == json.load(g)
    w = load_profile(out)["gpu_window"]
    assert w["state"] in ("recorded", "skipped"), w
    assert "the script" in w["note"] and "torch.profiler" in w["note"], w
    if w["state"] == "recorded":
        assert w["last_step"] <= 7, w


@needs_kineto
def test_a_trace_that_cannot_be_read_is_one_line_and_the_report_stands(tmp_path):
    out = str(tmp_path / "out")
    r = run_tool(["--gpu=on", "-o", out, script("broken_gpu_export.py")])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trained" in r.stdout
    profile = load_profile(out)
    w = profile["gpu_window"]
    assert w["state"] == "failed", w
    assert w["note"].startswith("the GPU window's trace could not be read: "), w
    assert [n for n in profile["notes"] if n.startswith("GPU window: ")] == ["GPU window: " + w["note"]]
    assert profile["steps"]["count"] == 20
    assert "gpu" not in profile
    report = r.stdout + r.stderr
    assert f"GPU window: {w['note']}" in report


@needs_kineto
def test_report_dir_reads_the_window_again(tmp_path):
    # `torchneck report DIR` rebuilds the report from profile.spill: the
    # window (and its trace, still in DIR/gpu) comes back with it.
    profile, _, _, out = run_loop(tmp_path, "--gpu=on", "--gpu-steps=3")
    before = profile["gpu_window"]
    assert before["state"] == "recorded", before
    os.remove(os.path.join(out, "profile.json"))
    r = subprocess.run([TOOL, "report", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    after = load_profile(out)["gpu_window"]
    assert after == before
    assert "GPU window: optimizer steps" in r.stdout + r.stderr
