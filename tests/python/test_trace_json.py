"""trace.json: valid Trace Event Format, checked by a validator written here
(not the writer's code), with event counts the planted script and the
Kineto fixture establish on their own."""

import collections
import gzip
import json
import os
import pstats
import shutil
import subprocess

import pytest

from conftest import ROOT, run_tool, script

FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "kineto")
ANALYZE = os.path.join(ROOT, "torchneck")
ADDMM_PER_STEP = 3
CALLS_PER_STEP = 4


def ns(us):
    return round(us * 1000)


def validate(path):
    """The structure trace.json promises; returns (doc, X events by cat, flows by cat)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] in ("ms", "ns")
    assert isinstance(doc["traceEvents"], list)
    assert "left_out" in doc["otherData"]
    pnames, tnames = set(), set()
    tracks = collections.defaultdict(list)
    flows = collections.defaultdict(list)
    by_cat = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in {"X", "M", "s", "f", "i", "C"}, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert isinstance(e["args"], dict)
            if e["name"] == "process_name":
                pnames.add(e["pid"])
            elif e["name"] == "thread_name":
                tnames.add((e["pid"], e["tid"]))
            continue
        assert e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["name"], str), e
            tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
            by_cat[e["cat"]].append(e)
        elif e["ph"] == "C":  # a counter (resident memory): numbers only
            assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
        elif e["ph"] in ("s", "f"):
            assert e["bp"] == "e"
            flows[e["id"]].append(e)
    used = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] != "M"}
    assert used <= tnames, f"unnamed tracks: {used - tnames}"
    assert {p for p, _ in used} <= pnames
    for key, spans in tracks.items():  # nesting per thread, no partial overlap
        spans.sort(key=lambda s: (s[0], -s[1]))
        ends = []
        for s, e in spans:
            while ends and ends[-1] <= s:
                ends.pop()
            assert not ends or e <= ends[-1], f"partial overlap on {key} at {s}"
            ends.append(e)
    flow_cats = collections.Counter()
    for fid, pair in flows.items():  # each s has one f, same cat, both inside a slice of their track
        assert sorted(p["ph"] for p in pair) == ["f", "s"], pair
        assert pair[0]["cat"] == pair[1]["cat"]
        for p in pair:
            t = ns(p["ts"])
            assert any(s <= t <= e for s, e in tracks[(p["pid"], p["tid"])]), p
        flow_cats[pair[0]["cat"]] += 1
    return doc, by_cat, flow_cats


def planted(tmp_path, mode, steps=12, trace_steps=2):
    # The script under a path holding "</script>", as a user's might.
    folder = tmp_path / "x<" / "script>"
    folder.mkdir(parents=True)
    target = str(folder / "train.py")
    shutil.copy(script("trace_planted.py"), target)
    out = str(tmp_path / "out")
    r = run_tool([f"--python={mode}", f"--trace-steps={trace_steps}", "-o", out, target, str(steps)])
    assert r.returncode == 0, r.stderr
    assert "trace.json" in r.stderr and "ui.perfetto.dev" in r.stderr
    return out, target


@pytest.mark.parametrize("mode", ["sample", "trace"])
def test_run_writes_a_valid_bounded_timeline(tmp_path, mode):
    # GIVEN a script with 3 addmm and 4 planted calls per step, 12 steps
    out, target = planted(tmp_path, mode)
    path = os.path.join(out, "trace.json")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "</script>" not in text and "<img" not in text
    # WHEN its trace.json is validated
    doc, by_cat, flows = validate(path)
    window = doc["otherData"]["window"]
    n = window["steps_in_window"]
    # THEN the window is the warm-up step(s) and 2 steady steps, at most 4 steps, and says so
    assert window["limited"] and window["steps_in_run"] == 12 and 3 <= n <= 4
    assert len(by_cat["step"]) == n
    assert {p["name"] for p in by_cat["phase"]} >= {"forward", "backward", "optimizer"}
    # AND it holds exactly the addmm calls of those steps, the rest counted as left out
    addmm = [e for e in by_cat["operator"] if e["name"] == "aten::addmm"]
    assert len(addmm) == ADDMM_PER_STEP * n
    assert doc["otherData"]["left_out"]["outside_step_window"]["operator"] > 0
    # AND every addmm's backward node is linked to it by a flow
    assert flows["fwdbwd"] >= ADDMM_PER_STEP * n
    # AND the hostile names survive
    assert doc["otherData"]["script"] == target
    assert any(m["name"] == "<img src=x onerror=alert(1)>" for m in by_cat["module"])
    if mode == "trace":
        calls = [e for e in by_cat["python"] if e["name"] == "planted_call"]
        assert len(calls) == CALLS_PER_STEP * n
        assert all(e["args"]["file"] == target for e in calls)


def test_report_rewrites_trace_json(tmp_path):
    # GIVEN a traced run (its Python calls go through profile.spill)
    out, _ = planted(tmp_path, "trace", steps=6, trace_steps=0)
    os.remove(os.path.join(out, "trace.json"))
    r = subprocess.run([ANALYZE, "report", "--trace-steps=1", out], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc, by_cat, _ = validate(os.path.join(out, "trace.json"))
    n = doc["otherData"]["window"]["steps_in_window"]
    assert doc["otherData"]["window"]["steps_option"] == 1 and n == 2  # step 0 is never steady: it and step 1
    assert len([e for e in by_cat["operator"] if e["name"] == "aten::addmm"]) == ADDMM_PER_STEP * n
    assert len([e for e in by_cat["python"] if e["name"] == "planted_call"]) == CALLS_PER_STEP * n


def test_trace_mode_keeps_an_import_as_one_slice(tmp_path):
    # GIVEN the planted script importing, in its first step, a module whose
    # import makes TICKS calls, twice the timeline's cap per thread (torch
    # 2.x imports torch._dynamo, ~1 M calls, at the first optimizer's creation)
    ticks, cap = 100_000, 50_000
    target = str(tmp_path / "train.py")
    shutil.copy(script("trace_planted.py"), target)
    (tmp_path / "heavy_import.py").write_text(
        f"def tick():\n    pass\n\n\nfor _ in range({ticks}):\n    tick()\n")
    out = str(tmp_path / "out")
    # WHEN it runs under the tracer
    r = run_tool(["--python=trace", "--trace-steps=2", f"--timeline-events={cap}", "-o", out, target, "6",
                  "heavy_import"])
    assert r.returncode == 0, r.stderr
    doc, by_cat, _ = validate(os.path.join(out, "trace.json"))
    n = doc["otherData"]["window"]["steps_in_window"]
    # THEN the steps' Python calls are still in the timeline
    assert len([e for e in by_cat["python"] if e["name"] == "planted_call"]) == CALLS_PER_STEP * n
    # AND an import is one slice: inside one, only the imports it made
    loads = [e for e in by_cat["python"] if e["name"] == "_find_and_load"]
    assert loads and all(e["args"]["file"] == "<frozen importlib._bootstrap>" for e in loads)
    spans = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in loads]
    inside = [e for e in by_cat["python"] if e["name"] != "_find_and_load"
              and any(t == e["tid"] and s < e["ts"] and e["ts"] + e["dur"] < f for s, f, t in spans)]
    assert inside == [], inside[:3]
    assert not any(e["name"] == "tick" for e in by_cat["python"])
    # AND the statistics still count every call the import made
    stats = pstats.Stats(os.path.join(out, "python.pstats")).stats
    assert [v[1] for k, v in stats.items() if k[2] == "tick" and k[0].endswith("heavy_import.py")] == [ticks]

def fixture_counts(name):
    """Kernels / memcpy / memset and their launch correlations, read from the fixture itself."""
    with gzip.open(os.path.join(FIXTURES, name), "rt") as f:
        trace = json.load(f)
    gpu = collections.Counter()
    for e in trace["traceEvents"]:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") == "X" and cat in ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"):
            gpu[{"memcpy": "gpu_memcpy", "memset": "gpu_memset"}.get(cat, cat)] += 1
    return gpu


def test_analyze_writes_gpu_streams_and_launch_flows(tmp_path):
    name = "v100_resnet_rank0.trace.json.gz"
    out = str(tmp_path / "out")
    r = subprocess.run([ANALYZE, "analyze", "--trace-steps=0", "-o", out, os.path.join(FIXTURES, name)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc, by_cat, flows = validate(os.path.join(out, "trace.json"))
    # THEN every kernel, memcpy and memset of the fixture is on a GPU stream track
    expected = fixture_counts(name)
    for cat, count in expected.items():
        assert len(by_cat[cat]) == count, cat
    assert all("grid" in k["args"] and "block" in k["args"] for k in by_cat["kernel"])
    # AND each one is linked to the runtime call that launched it
    assert flows["ac2g"] == sum(expected.values())
    assert flows["fwdbwd"] > 0


def test_analyze_window_of_steps(tmp_path):
    out = str(tmp_path / "out")
    r = subprocess.run([ANALYZE, "analyze", "--trace-steps=1", "-o", out,
                        os.path.join(FIXTURES, "v100_resnet_rank0.trace.json.gz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc, by_cat, _ = validate(os.path.join(out, "trace.json"))
    window = doc["otherData"]["window"]
    assert window["limited"] and len(by_cat["step"]) == window["steps_in_window"] < window["steps_in_run"]
    assert sum(doc["otherData"]["left_out"]["outside_step_window"].values()) > 0


def _trace_processor():
    found = os.environ.get("TORCHNECK_TRACE_PROCESSOR") or shutil.which("trace_processor_shell") \
        or shutil.which("trace_processor")
    return found


@pytest.mark.skipif(_trace_processor() is None,
                    reason="no Perfetto trace_processor here (no Debian or npm package ships one; "
                           "set TORCHNECK_TRACE_PROCESSOR to a trace_processor_shell binary)")
def test_perfetto_trace_processor_imports_without_errors(tmp_path):
    out, _ = planted(tmp_path, "trace", steps=6)
    query = tmp_path / "q.sql"
    query.write_text("select group_concat(name) as import_errors from stats "
                     "where severity in ('error', 'data_loss') and value > 0;\n")
    r = subprocess.run([_trace_processor(), "-q", str(query), os.path.join(out, "trace.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # The one row's value is NULL when no error counter is set.
    assert "json" not in r.stdout and "error" not in r.stdout.replace("import_errors", ""), r.stdout


@pytest.mark.parametrize("name", ["backward_thread.trace.json", "mi250_minitoy.trace.json.gz",
                                  "cpu_only_gloo_rank34.trace.json.gz", "old_categories_inference.trace.json.gz"])
def test_analyze_trace_json_is_valid_for_varied_traces(tmp_path, name):
    # GIVEN traces with backward on another thread, ROCm, no GPU, old category names
    out = str(tmp_path / "out")
    r = subprocess.run([ANALYZE, "analyze", "-o", out, os.path.join(FIXTURES, name)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # THEN trace.json is valid, with every kernel the fixture has when the window holds all steps
    doc, by_cat, flows = validate(os.path.join(out, "trace.json"))
    if name.endswith(".gz") and not doc["otherData"]["window"]["limited"]:
        for cat, count in fixture_counts(name).items():
            assert len(by_cat[cat]) == count, cat
