"""Flame graph files (stacks.folded, profile.speedscope.json) against ground truth.

GIVEN scripts/flame_workload.py, copied under a directory whose name holds
      "</script>" and ";", which times its phases with time.perf_counter:
      heavy_mm (torch.mm back to back), pure_python, a call to an nn.Module
      class named "<img src=x onerror=alert(1)>", a backward pass
WHEN  it runs under `./torchneck run -o OUT`
THEN  stacks.folded is one valid `frames N` line per path, its total is the
      sampled time of profile.json's python[] (the same samples, counted
      there independently of the flame join), heavy_mm has aten::mm below
      it and heavy_mm's and pure_python's shares of loop() are the script's
      own shares within sampling tolerance; profile.speedscope.json follows
      speedscope's file format; hostile names survive intact (in the folded
      file modulo ";" -> ":", docs/flame-graphs.md).
AND   `torchneck analyze` of a Kineto trace writes a stacks.folded whose total
      is the trace's CPU-op time, computed here from the trace JSON.

Run with: /usr/bin/python3 -m pytest -q tests/python/test_flame.py
"""

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "torchneck"
WORKLOAD = ROOT / "tests" / "python" / "scripts" / "flame_workload.py"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"
HOSTILE = "<img src=x onerror=alert(1)>"
LINE = re.compile(r"^([^\n]+) (\d+)$")

# Shares of loop() time: 200 Hz over ~1.5 s is ~300 samples (binomial error
# ~3 %), plus GIL hand-off and phase-edge effects on a loaded machine.
SHARE_TOLERANCE = 0.10


def parse_folded(text):
    """[(frames, microseconds)], asserting every line is one valid path."""
    assert text == "" or text.endswith("\n")
    paths = []
    for line in text.split("\n")[:-1]:
        m = LINE.match(line)
        assert m, f"not a folded line: {line!r}"
        paths.append((m.group(1).split(";"), int(m.group(2))))
    return paths


def check_speedscope(doc):
    """Structural check against https://www.speedscope.app/file-format-schema.json."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    for f in frames:
        assert isinstance(f["name"], str)
        assert set(f) <= {"name", "file", "line", "col"}
    total = 0
    assert doc["profiles"]
    for p in doc["profiles"]:
        assert p["type"] == "sampled" and p["unit"] == "nanoseconds"
        assert isinstance(p["name"], str)
        assert len(p["samples"]) == len(p["weights"])
        for s in p["samples"]:
            assert s and all(isinstance(i, int) and 0 <= i < len(frames) for i in s)
        assert all(isinstance(w, int) and w > 0 for w in p["weights"])
        assert p["startValue"] == 0 and p["endValue"] == sum(p["weights"])
        total += p["endValue"]
    return total


def weight_below(paths, frame_pred):
    """Microseconds of the paths through a frame matching frame_pred."""
    return sum(us for frames, us in paths if any(frame_pred(f) for f in frames))


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("flame")
    where = base / "x</script>;y"  # "x<" / "script>;y": the path holds "</script>"
    where.mkdir(parents=True)
    script = where / WORKLOAD.name
    shutil.copy(WORKLOAD, script)
    truth_path = base / "truth.json"
    out = base / "out"
    cmd = [str(CLI), "run", "-o", str(out), str(script), str(truth_path)]
    proc = subprocess.run(cmd, cwd=base, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return {
        "script": str(script),
        "out": out,
        "stderr": proc.stderr,
        "truth": json.loads(truth_path.read_text()),
        "profile": json.loads((out / "profile.json").read_text()),
        "folded": (out / "stacks.folded").read_text(encoding="utf-8"),
        "speedscope_text": (out / "profile.speedscope.json").read_text(encoding="utf-8"),
    }


def sampled_us(profile):
    return sum(f["self_ms"] for f in profile["python"]) * 1000.0


def test_folded_total_is_the_sampled_time(hostile_run):
    paths = parse_folded(hostile_run["folded"])
    total = sum(us for _, us in paths)
    # python[].self_ms holds every sampled nanosecond once (leaf frames).
    assert abs(total - sampled_us(hostile_run["profile"])) <= len(paths) + 2


def test_samples_in_window_plus_dropped_are_all_thread_samples(hostile_run):
    p = hostile_run["profile"]
    assert p["timeline_samples"] > 0
    assert p["timeline_samples"] + p["dropped_samples"] == sum(f["self_samples"] for f in p["python"])


def test_heavy_function_has_mm_below_and_its_measured_share(hostile_run):
    paths = parse_folded(hostile_run["folded"])
    script = hostile_run["script"].replace(";", ":")
    heavy = f"heavy_mm ({script}:"
    pure = f"pure_python ({script}:"
    loop = f"loop ({script}:"
    loop_us = weight_below(paths, lambda f: f.startswith(loop))
    heavy_us = weight_below(paths, lambda f: f.startswith(heavy))
    pure_us = weight_below(paths, lambda f: f.startswith(pure))
    mm_below_heavy = sum(us for frames, us in paths
                         if any(f.startswith(heavy) for f in frames) and frames[-1] == "aten::mm")
    truth = hostile_run["truth"]
    assert loop_us > 0
    assert abs(heavy_us / loop_us - truth["heavy_mm"] / truth["loop"]) <= SHARE_TOLERANCE, (heavy_us, loop_us, truth)
    assert abs(pure_us / loop_us - truth["pure_python"] / truth["loop"]) <= SHARE_TOLERANCE, (pure_us, loop_us, truth)
    # heavy_mm is torch.mm back to back: most of its time is in the operator
    assert mm_below_heavy >= 0.7 * heavy_us, (mm_below_heavy, heavy_us)
    # and no operator below pure_python beyond noise
    ops_below_pure = sum(us for frames, us in paths
                         if any(f.startswith(pure) for f in frames) and frames[-1].startswith("aten::"))
    assert ops_below_pure <= 0.1 * max(pure_us, 1)


def test_hostile_names_survive(hostile_run):
    folded = hostile_run["folded"]
    paths = parse_folded(folded)
    frames = {f for fr, _ in paths for f in fr}
    # the module class, as a module frame, intact
    assert any(HOSTILE in f for f in frames), sorted(frames)[:20]
    # the script's path: "</script>" intact, ";" documented as ":"
    sanitised = hostile_run["script"].replace(";", ":")
    assert any(f"({sanitised}:" in f for f in frames)
    assert not any(hostile_run["script"] in f for f in frames)  # the raw ";" never splits a frame

    text = hostile_run["speedscope_text"]
    assert "</script>" not in text  # escaped, so it can be embedded in a page
    doc = json.loads(text)
    check_speedscope(doc)
    names = [f["name"] for f in doc["shared"]["frames"]]
    files = [f.get("file", "") for f in doc["shared"]["frames"]]
    assert any(HOSTILE in n for n in names)
    assert hostile_run["script"] in files  # intact, ";" included


def test_speedscope_total_matches_folded(hostile_run):
    doc = json.loads(hostile_run["speedscope_text"])
    total_ns = check_speedscope(doc)
    paths = parse_folded(hostile_run["folded"])
    assert abs(total_ns / 1000.0 - sum(us for _, us in paths)) <= 1


def test_files_are_listed_in_the_report(hostile_run):
    err = hostile_run["stderr"]
    assert "stacks.folded" in err and "flamegraph.pl" in err
    assert "profile.speedscope.json" in err and "speedscope" in err


def test_outside_the_window_samples_keep_python_paths(tmp_path):
    """A tiny --timeline-events: most samples beyond the window, yet the
    folded total is still all sampled time and the count check holds."""
    out = tmp_path / "out"
    cmd = [str(CLI), "run", "--timeline-events=40", "-o", str(out), str(WORKLOAD),
           str(tmp_path / "truth.json"), "3"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    profile = json.loads((out / "profile.json").read_text())
    assert profile["timeline_samples"] <= 40
    assert profile["dropped_samples"] > 0
    assert profile["timeline_samples"] + profile["dropped_samples"] == sum(f["self_samples"] for f in profile["python"])
    paths = parse_folded((out / "stacks.folded").read_text())
    assert abs(sum(us for _, us in paths) - sampled_us(profile)) <= len(paths) + 2
    assert weight_below(paths, lambda f: f.startswith("heavy_mm (")) > 0


def cpu_op_time_us(trace_path):
    """Per thread, the union of the CPU-side events' spans (cpu_op,
    user_annotation and the old "Operator" category), summed: what the
    thread spent inside torch operators and scopes."""
    opener = gzip.open if trace_path.suffix == ".gz" else open
    with opener(trace_path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator", "user_annotation"):
            spans.setdefault((e.get("pid"), e.get("tid")), []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    total = 0.0
    for intervals in spans.values():
        intervals.sort()
        start, end = intervals[0]
        for s, t in intervals[1:]:
            if s > end:
                total += end - start
                start, end = s, t
            else:
                end = max(end, t)
        total += end - start
    return total


@pytest.mark.parametrize("fixture", ["v100_resnet50_num_workers_0.trace.json.gz", "backward_thread.trace.json"])
def test_analyze_writes_a_flame_graph_of_the_trace(tmp_path, fixture):
    trace = FIXTURES / fixture
    if not trace.exists():
        pytest.skip(f"fixture {trace} not present")
    out = tmp_path / "out"
    proc = subprocess.run([str(CLI), "analyze", "-o", str(out), str(trace)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    paths = parse_folded((out / "stacks.folded").read_text())
    assert paths
    folded_us = sum(us for _, us in paths)
    truth_us = cpu_op_time_us(trace)
    assert abs(folded_us - truth_us) <= max(2.0, 1e-4 * truth_us), (folded_us, truth_us)
    total_ns = check_speedscope(json.loads((out / "profile.speedscope.json").read_text()))
    assert abs(total_ns / 1000.0 - folded_us) <= 1


def test_trace_mode_puts_every_operator_below_its_python_caller(tmp_path):
    # GIVEN the planted workload under the tracer (exact call times), with
    # more steps than trace.json shows (the flame graph covers them all)
    truth_path = tmp_path / "truth.json"
    out = tmp_path / "out"
    cmd = [str(CLI), "run", "--python", "trace", "--trace-steps", "1", "-o", str(out), str(WORKLOAD),
           str(truth_path), "8"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads(truth_path.read_text())
    paths = parse_folded((out / "stacks.folded").read_text(encoding="utf-8"))
    heavy = f"heavy_mm ({WORKLOAD}:"
    heavy_us = weight_below(paths, lambda f: f.startswith(heavy))
    # THEN heavy_mm's time in the graph is the time the script measured
    # around its calls (traced calls are exact, not sampled)...
    assert heavy_us == pytest.approx(truth["heavy_mm"] * 1e6, rel=0.10), (heavy_us, truth)
    # ...below the script's own frames, outermost first...
    through = [frames for frames, _ in paths if any(f.startswith(heavy) for f in frames)]
    assert through and all(any(f.startswith(f"loop ({WORKLOAD}:") for f in frames) for frames in through)
    assert all(any(f.startswith("<module> (") for f in frames) for frames in through)
    # ...and it is aten::mm below it, as the script does nothing else there
    mm_below = sum(us for frames, us in paths if any(f.startswith(heavy) for f in frames) and "aten::mm" in frames)
    assert mm_below >= 0.7 * heavy_us, (mm_below, heavy_us)
