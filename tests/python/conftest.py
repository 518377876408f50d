"""Shared helpers: run the built tool as a user would, as a subprocess."""

import json
import os
import signal
import statistics
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "tests", "python", "scripts")
TOOL = os.path.join(ROOT, "torchneck")
# The interpreter running the tests is the one with torch (the Makefile picks it).
PYTHON = sys.executable


def pytest_configure(config):
    # The scripts' endings are compared with plain Python's for a SIGINT
    # that acts: a suite started with `&` by a shell without job control
    # inherits SIGINT ignored (and so would every script it starts).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers", "quiet_machine: its premise holds only with the cores to itself; `make test` runs it apart "
                   "from the busy loops of test-python-loaded")
    config.addinivalue_line(
        "markers", "native_only: exercises only the native binaries (torchneck-analyze) and the sources, which "
                   "no Python or torch version changes: Debian 13's half (scripts/test-trixie.sh) leaves it to "
                   "Debian 12's")


def script(name):
    return os.path.join(SCRIPTS, name)


def run_tool(args, cwd=None, timeout=300, **kw):
    """./torchneck run ARGS...; returns the CompletedProcess."""
    return subprocess.run([TOOL, "run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def run_plain(args, cwd=None, timeout=300, **kw):
    """The same script under plain Python: the oracle for exit status and output."""
    return subprocess.run([PYTHON, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def load_profile(out_dir):
    with open(os.path.join(out_dir, "profile.json")) as f:
        return json.load(f)


# A busy machine: the run's main thread waited for a CPU this share of its
# wall time (core_contention's line, docs/findings.md), by its own schedstat.
# A test whose premise is free cores (workers or windows that pay off) asks
# this of the same run before it holds the tool to that premise.
CONTENDED_SHARE = 0.10
# A light step's phase is atypical, its excess split apart, beyond twice its
# level (light_steps.h kAtypicalFactor).
ATYPICAL_FACTOR = 2.0


def contended(profile):
    run = profile["run"]
    return run["main_thread_runqueue_s"] >= CONTENDED_SHARE * run["wall_s"]


@pytest.fixture
def out_dir(tmp_path):
    return str(tmp_path / "out")


def truth_share(truth, profile, phase):
    """The script's own share of `phase`, over the steps the profile calls steady."""
    steps = profile["steps"]["per_step"]
    per = truth["per_step_s"]
    assert len(steps) == len(per["step"]), "step boundaries differ from the script's iterations"
    keep = [i for i, s in enumerate(steps) if s["steady"]]
    return sum(per[phase][i] for i in keep) / sum(per["step"][i] for i in keep)


def own_growth(profile, truth):
    """The script's own step time growth over a run: the median of the
    last third of its steady steps (as the profile marks them) over the
    first third's, less 1, by the script's own per-step clock
    (truth["per_step_s"]["step"]), as step_time_drift reads a run (its
    thirds): a machine that slows down mid-run slows that clock as much."""
    rows = truth["per_step_s"]["step"]
    own = [rows[i] for i, s in enumerate(profile["steps"]["per_step"]) if s["steady"]]
    k = len(own) // 3
    return statistics.median(own[-k:]) / statistics.median(own[:k]) - 1


# The phases a detail-window run estimates in its light steps from its
# detailed ones (docs/overhead.md, "How the run-wide figures are
# estimated"): forward and evaluation, and the optimizer where it runs the
# model (LBFGS's closure, GradScaler's checks: its light time is split
# too); data and backward are measured in every step.
ESTIMATED_PHASES = ("forward", "evaluation", "optimizer")


def window_sampling_pp(profile, per_step_s, keys, keep):
    """What a detail-window run's estimate of a phase's share may err by
    from sampling alone, in percentage points of the steady steps' time:
    three standard errors of a mean of the detailed steps it learns from
    (steady, or left out of the step times for the detail's cost), the
    spread taken from the script's own per-step shares (seconds per row in
    per_step_s, summed over keys) in this same run, weighted by the time of
    the steady steps it estimated. Zero where it estimated none. A loaded
    machine spreads the shares, and the allowance with them."""
    steps = profile["steps"]["per_step"]
    learnt = [i for i, s in enumerate(steps) if s["detailed"] and (s["steady"] or s["detail_excluded"])]
    estimated_s = sum(per_step_s["step"][i] for i in keep if not steps[i]["detailed"])
    if len(learnt) < 2 or estimated_s == 0:
        return 0.0
    rows = sorted(set(learnt) | set(keep))
    shares = [100 * sum(per_step_s[k][i] for k in keys) / per_step_s["step"][i] for i in rows]
    weight = estimated_s / sum(per_step_s["step"][i] for i in keep)
    return 3 * statistics.stdev(shares) / len(learnt) ** 0.5 * weight


def contention_stall_pp(profile, per_step_s, keep):
    """What a detail-window run's estimate of a phase may err by beyond
    sampling when its process waited for CPUs (contended): a stall in a step
    outside the windows lands inside a light phase that may hold several
    phases (LBFGS's optimizer.step holds its closures' forward), and is
    split as the detailed steps split that phase, wherever it fell. At most
    the time of the estimated steady steps over ATYPICAL_FACTOR times the
    steady steps' median beyond that median, by the script's clock, in
    percentage points of the steady steps' time; zero where the run had its
    cores."""
    if not contended(profile):
        return 0.0
    steps = profile["steps"]["per_step"]
    rows = [per_step_s["step"][i] for i in keep]
    median = statistics.median(rows)
    stalled = [per_step_s["step"][i] for i in keep
               if not steps[i]["detailed"] and per_step_s["step"][i] > ATYPICAL_FACTOR * median]
    return 100 * sum(r - median for r in stalled) / sum(rows)
