"""`torchneck diff` on planted pairs (tests/python/scripts/loops/diff_pair.py,
two runs of one script whose knobs plant the change) against the change the
script measures itself with time.perf_counter in the same two runs: the
change within diff's own interval, the phase that moved, the findings
resolved; two runs of one setting; the regression gate; Kineto traces; and
bad input (one line, exit 2, nothing written)."""

import json
import os
import subprocess

import pytest

from conftest import ROOT, contended, load_profile, own_growth, run_tool, script, truth_share

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
TOOL = os.path.join(ROOT, "torchneck")


def diff(args, cwd=None):
    return subprocess.run([TOOL, "diff", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def profiled(tmp_path, name, *args):
    """A run of diff_pair.py with ARGS: (its output folder, the profile,
    the script's own truth)."""
    out = str(tmp_path / name)
    truth = str(tmp_path / (name + ".truth.json"))
    r = run_tool(["-o", out, script(os.path.join("loops", "diff_pair.py")), "--truth", truth, *args], timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(truth) as f:
        return out, load_profile(out), json.load(f)


def own_mean_ms(profile, truth):
    """The script's own mean step over the steps the profile's diff samples
    (steady, not the GPU window's): rows line up with per_step one to one."""
    per_step = profile["steps"]["per_step"]
    rows = truth["per_step_s"]["step"]
    assert len(per_step) == len(rows), (len(per_step), len(rows))
    keep = [i for i, s in enumerate(per_step) if s["steady"] and not s["gpu_window"]]
    return 1e3 * sum(rows[i] for i in keep) / len(keep)


# step_time_drift's finding needs the steps to grow 20 % (kDriftShare); a
# run whose own clock grew 3/4 of that drifted as the finding says.
OWN_DRIFT = 0.15


# input_bound's line (docs/findings.md), and how far our data share may be
# from the script's own: near the line either verdict is right.
INPUT_BOUND_PCT, DATA_TOLERANCE_PP = 25.0, 5.0


def own_change_pct(before, after):
    return 100 * (own_mean_ms(*after) / own_mean_ms(*before) - 1)


def run_diff(tmp_path, before, after, *extra):
    out = str(tmp_path / "diff")
    r = diff(["-o", out, before, after, *extra])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "diff.json")) as f:
        d = json.load(f)
    assert d["schema"] == "torchneck.diff/1"
    assert os.path.getsize(os.path.join(out, "diff.html")) > 1000
    return d, r.stdout


def inside(value, interval, slack=1.0):
    return interval[0] - slack <= value <= interval[1] + slack


def test_a_faster_loader_is_the_data_phase_and_resolves_input_bound(tmp_path):
    dir_b, pb, tb = profiled(tmp_path, "slow_loader", "--read-ms", "10", "--hidden", "256")
    # The fast loader reads from memory (no sleep): a 0.5 ms sleep gives a
    # data share of ~15 %, near input_bound's 25 %, and one CI run on
    # Debian 13 kept input_bound; without it the share is ~1 %.
    dir_a, pa, ta = profiled(tmp_path, "fast_loader", "--read-ms", "0", "--hidden", "256")
    d, text = run_diff(tmp_path, dir_b, dir_a)
    own = own_change_pct((pb, tb), (pa, ta))
    # The change is the script's own within diff's interval (1 point of
    # slack: the profiler's own cost per step differs a little between the
    # two settings).
    assert own < -30, f"the script's own clock shows {own:.1f} %: the pair planted no speed-up"
    assert inside(own, d["ci95_pct"]), (own, d["step_change_pct"], d["ci95_pct"])
    assert d["significant"] and d["step_change_pct"] < 0
    assert d["phases"][0]["name"] == "data", d["phases"]
    # input_bound resolved where the script's own clock puts the fast
    # loader's wait under the finding's line (beside other work even an
    # in-memory loader waits for a CPU, and near the line either is right).
    own_after = 100 * truth_share(ta, pa, "data_wait")
    if own_after < INPUT_BOUND_PCT - DATA_TOLERANCE_PP:
        assert "input_bound" in d["findings"]["resolved"], (own_after, d["findings"])
        [detail] = [f for f in d["findings"]["details"] if f["id"] == "input_bound"]
        assert detail["estimated_change_pct"] is not None and detail["measured_change_pct"] == d["step_change_pct"]
        assert f"estimated {detail['estimated_change_pct']:+.1f} %, measured {d['step_change_pct']:+.1f} %" in text
    elif own_after >= INPUT_BOUND_PCT + DATA_TOLERANCE_PP:
        assert "input_bound" in d["findings"]["kept"], (own_after, d["findings"])
    assert text.startswith("torchneck diff\n") and "VERDICT: Faster: " in text


def test_lighter_layers_move_forward_and_backward_and_resolve_heavy_layer(tmp_path):
    dir_b, pb, tb = profiled(tmp_path, "heavy", "--hidden", "1024", "--read-ms", "0.5")
    dir_a, pa, ta = profiled(tmp_path, "light", "--hidden", "64", "--read-ms", "0.5")
    before_found = {f["id"] for f in pb["findings"] if f["severity"] in ("medium", "high")}
    # The premise where the heavy run had its cores: beside busy loops the
    # waits for a CPU land on every layer (its loop waited 49 % once, Debian
    # 13), and the hidden layers' share can come under heavy_layer's line.
    if not contended(pb):
        assert "heavy_layer" in before_found, f"the heavy setting planted no heavy_layer: {pb['findings']}"
    d, _ = run_diff(tmp_path, dir_b, dir_a)
    own = own_change_pct((pb, tb), (pa, ta))
    assert inside(own, d["ci95_pct"]), (own, d["step_change_pct"], d["ci95_pct"])
    assert {d["phases"][0]["name"], d["phases"][1]["name"]} == {"forward", "backward"}, d["phases"]
    # The two middle Linear layers (named 2 and 4 by named_modules) moved most.
    assert {d["layers"][0]["name"], d["layers"][1]["name"]} == {"2", "4"}, d["layers"][:3]
    if "heavy_layer" in before_found:
        assert "heavy_layer" in d["findings"]["resolved"], d["findings"]


def test_two_runs_of_one_setting_are_no_significant_change(tmp_path):
    # Reads of 8 ms: data near 60 % of the step here, far from every
    # detector's threshold (at 2 ms, data near 30 % sits by input_bound's
    # 25 %, and on a fast machine the mean operator time by
    # framework_overhead's 10 us: such findings can cross between two runs
    # of one setting, which diff notes, tested in tests/cpp/diff_test.cc).
    dir_b, pb, tb = profiled(tmp_path, "first", "--read-ms", "8")
    dir_a, pa, ta = profiled(tmp_path, "second", "--read-ms", "8")
    d, text = run_diff(tmp_path, dir_b, dir_a)
    own = own_change_pct((pb, tb), (pa, ta))
    assert inside(own, d["ci95_pct"]), (own, d["step_change_pct"], d["ci95_pct"])
    # When the script's own clocks agree within the floor of run-to-run
    # drift, diff must call it no change; a machine that drifted more
    # between the two runs is a change both clocks see, and then only the
    # interval's holding the script's own change (above) is checked.
    if abs(own) < d["floor_pct"] - 0.5:
        assert not d["significant"], (own, d["step_change_pct"], d["ci95_pct"])
        assert "VERDICT: No significant change" in text
    assert "input_bound" in d["findings"]["kept"], d["findings"]
    # No finding crosses between two runs of one setting, but what the
    # machine did to one of them: a drift (2 shared cores slowing down
    # mid-run), then that run's own clock grew as much; other work taking the
    # cores, then that run's main thread waited for a CPU (busy_machine).
    for side, run in (("resolved", (pb, tb)), ("new", (pa, ta))):
        for f in d["findings"][side]:
            assert f in ("step_time_drift", "busy_machine"), d["findings"]
            if f == "step_time_drift":
                assert own_growth(*run) >= OWN_DRIFT, (d["findings"], side, own_growth(*run))
            else:
                assert contended(run[0]), (d["findings"], side, run[0]["machine_load"])


def test_the_gate_fails_only_a_slowdown_beyond_its_percentage(tmp_path):
    fast, pf, tf = profiled(tmp_path, "fast", "--read-ms", "0.5", "--hidden", "256")
    slow, ps, ts = profiled(tmp_path, "slow", "--read-ms", "6", "--hidden", "256")
    # premise, by the script's own clock: the slow run is slower by far more
    # than the gate's 10 %, and by far less than its 900 %
    own = own_change_pct((pf, tf), (ps, ts))
    assert 30 <= own <= 600, own
    r = diff(["-o", str(tmp_path / "d1"), fast, slow, "--fail-if-slower", "10"])
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith("torchneck: slower by ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert os.path.exists(tmp_path / "d1" / "diff.json")  # the report is written all the same
    assert diff(["-o", str(tmp_path / "d2"), fast, slow, "--fail-if-slower=900"]).returncode == 0
    assert diff(["-o", str(tmp_path / "d3"), slow, fast, "--fail-if-slower", "0"]).returncode == 0  # faster


def steady_steps(profile):
    """The steps diff samples, counted from the profile's own rows."""
    return sum(1 for s in profile["steps"]["per_step"] if s["steady"] and not s["gpu_window"])


def test_too_few_steps_give_no_interval_and_the_gate_cannot_decide(tmp_path):
    # Three steps a run, fewer steady ones than the 5 an interval needs; the
    # second run's loader sleeps 40 ms a read, the first's not at all.
    dir_b, pb, tb = profiled(tmp_path, "fast", "--steps", "3", "--read-ms", "0")
    dir_a, pa, ta = profiled(tmp_path, "slow", "--steps", "3", "--read-ms", "40")
    own = own_change_pct((pb, tb), (pa, ta))
    assert own > 100, f"the script's own clock shows {own:.1f} %: the pair planted no slowdown"
    n_before, n_after = steady_steps(pb), steady_steps(pa)
    assert min(n_before, n_after) < 5, (n_before, n_after)
    out = tmp_path / "d"
    r = diff(["-o", str(out), dir_b, dir_a, "--fail-if-slower", "10"])
    # The gate neither passes nor calls it slower: one line, its own status.
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [f"torchneck: --fail-if-slower 10 % cannot decide: too few steady steps: "
                                     f"{n_before} before, {n_after} after (an interval needs 5 in each)"], r.stderr
    # No interval anywhere: null in diff.json, none in the text.
    with open(out / "diff.json") as f:
        d = json.load(f)
    assert d["ci95_pct"] is None and d["block_length"] is None and not d["significant"], d
    assert (d["before"]["steady_steps"], d["after"]["steady_steps"]) == (n_before, n_after)
    text = (out / "diff.txt").read_text()
    assert "95 %" not in text and "95 %" not in d["verdict"], text
    assert "VERDICT: Cannot tell a change from noise" in text and text in r.stdout
    # Without the gate, the same report and exit 0.
    assert diff(["-o", str(tmp_path / "d2"), dir_b, dir_a]).returncode == 0


def test_a_kineto_trace_against_itself_is_no_change(tmp_path):
    trace = os.path.join(FIXTURES, "v100_resnet50_num_workers_0.trace.json.gz")
    d, _ = run_diff(tmp_path, trace, trace)
    # The same steps on both sides: no change, an interval about 0 as wide
    # as the trace's own step-to-step noise says, nothing significant.
    assert d["step_change_pct"] == 0 and d["ci95_pct"][0] < 0 < d["ci95_pct"][1] and not d["significant"]
    assert d["before"]["steady_steps"] >= 5 and d["before"]["step_ms"] > 0
    assert d["findings"]["resolved"] == [] and d["findings"]["new"] == [] and d["findings"]["kept"]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    run_dir, _, _ = profiled(tmp_path, "one", "--steps", "8")
    other = tmp_path / "other.py"
    for name, to in (("diff_pair.py", other), ("looptruth.py", tmp_path / "looptruth.py")):
        with open(script(os.path.join("loops", name))) as f:
            to.write_text(f.read())
    other_dir = str(tmp_path / "other_run")
    r = run_tool(["-o", other_dir, str(other), "--steps", "8"], timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    junk = tmp_path / "junk.json"
    junk.write_text("{\"schema\": \"something/1\"}")
    cases = [
        ([str(not_a_run), run_dir], "not a torchneck run or analyze folder"),
        ([run_dir, str(tmp_path / "missing")], "no such file or folder"),
        ([run_dir, other_dir], "different scripts; give --different-scripts"),
        ([str(junk), run_dir], ""),
        ([run_dir], "diff needs two runs"),
    ]
    for args, words in cases:
        out = tmp_path / "d"
        r = diff(["-o", str(out), *args])
        assert r.returncode == 2, (args, r.returncode, r.stdout[-500:])
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("torchneck: "), r.stderr
        assert words in r.stderr, (words, r.stderr)
        assert not out.exists(), args  # nothing written for a refused comparison
    # AND different scripts are compared when asked, with a note
    d, text = run_diff(tmp_path, run_dir, other_dir, "--different-scripts")
    assert d["same_script"] is False and "different scripts" in " ".join(d["notes"])
