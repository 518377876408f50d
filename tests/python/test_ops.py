"""The operator collector counts what torch.autograd.profiler counts.

GIVEN a deterministic training workload (scripts/ops_workload.py: conv net
forward, backward and SGD step, a record_function block and a DataLoader),
WHEN it runs once under torch.autograd.profiler.profile() (the oracle, in its
own process) and once under `torchneck run --python=off`,
THEN every operator, backward node and user scope both see has the same
number of calls, self time never exceeds total time, and the top operator
carries sampled input shapes.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "torchneck")
WORKLOAD = os.path.join(ROOT, "tests", "python", "scripts", "ops_workload.py")
STEPS = 300
KINDS = {"operator", "backward", "user_scope", "torchscript"}

# Runs a script with runpy inside torch.autograd.profiler.profile() and dumps
# {key: count} from key_averages(). One adjustment: the profiler's
# _build_tree() drops an event whose parent has the same name and no other
# child (aten::div calling aten::div, aten::sum calling aten::sum), deciding
# nesting on microsecond timestamps, so how many it drops varies from run to
# run. Each of those is a real RecordFunction call, so the oracle keeps them.
ORACLE = r"""
import json, runpy, sys
import torch
from torch.autograd import profiler_util
if hasattr(profiler_util.EventList, "_remove_dup_nodes"):
    profiler_util.EventList._remove_dup_nodes = lambda self: None
out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
with torch.autograd.profiler.profile() as prof:
    runpy.run_path(script, run_name="__main__")
with open(out, "w") as f:
    json.dump({e.key: e.count for e in prof.key_averages()}, f)
"""


def profiler_filters(name):
    """Names the autograd profiler leaves out of its results on purpose."""
    try:
        from torch.autograd.profiler_util import _filter_name
    except ImportError:
        return False
    return _filter_name(name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ops")
    oracle_json = str(tmp / "oracle.json")
    oracle = subprocess.run(
        [sys.executable, "-c", ORACLE, oracle_json, WORKLOAD, "--steps", str(STEPS)],
        capture_output=True, text=True, timeout=600)
    assert oracle.returncode == 0, oracle.stderr
    with open(oracle_json) as f:
        counts = json.load(f)

    out = str(tmp / "out")
    tool = subprocess.run(
        # --detail=full: every operator of the run, to compare with the
        # autograd profiler's counts (the default's windows count the
        # detailed steps only: test_detail_windows.py, docs/overhead.md)
        [TOOL, "run", "--python=off", "--detail=full", "-o", out, WORKLOAD, "--steps", str(STEPS)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert tool.returncode == 0, tool.stderr
    with open(os.path.join(out, "profile.json")) as f:
        profile = json.load(f)
    return {"oracle": counts, "oracle_stdout": oracle.stdout,
            "profile": profile, "tool_stdout": tool.stdout}


def calls_by_name(ops):
    calls = {}
    for op in ops:
        calls[op["name"]] = calls.get(op["name"], 0) + op["calls"]
    return calls


def find(ops, name):
    found = [op for op in ops if op["name"] == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def test_the_workload_ran_the_same_under_both(runs):
    # Same seed, same steps: the script's own output is the same.
    assert runs["tool_stdout"] == runs["oracle_stdout"]
    assert f"steps={STEPS}" in runs["tool_stdout"]


def test_call_counts_equal_the_autograd_profiler(runs):
    oracle = runs["oracle"]
    mine = calls_by_name(runs["profile"]["ops"])
    both = sorted(set(oracle) & set(mine))
    assert len(both) >= 40, (sorted(oracle), sorted(mine))
    assert {n: (oracle[n], mine[n]) for n in both if oracle[n] != mine[n]} == {}
    assert sorted(set(oracle) - set(mine)) == []
    # The launcher's own scopes: torchneck::backward around each backward
    # call (python/torchneck/backward_scope.py), one per step, and
    # torchneck::graph_watch around each look of the graph watch, after
    # optimizer steps 2, 4, 8, ... (python/torchneck/graph_watch.py)
    assert mine.get("torchneck::backward") == STEPS
    assert mine.get("torchneck::graph_watch") == STEPS.bit_length() - 1
    launcher = {"torchneck::backward", "torchneck::graph_watch", "torchneck::eval_mode", "torchneck::train_mode"}
    assert [n for n in sorted(set(mine) - set(oracle)) if not profiler_filters(n) and n not in launcher] == []


def test_backward_nodes_and_user_scopes_have_their_kind_and_count(runs):
    ops, oracle = runs["profile"]["ops"], runs["oracle"]
    assert {op["kind"] for op in ops} <= KINDS
    expected = {  # (name, kind): calls, from the workload's structure
        ("aten::convolution", "operator"): 2 * STEPS,
        ("ConvolutionBackward0", "backward"): 2 * STEPS,
        ("AddmmBackward0", "backward"): STEPS,
        ("ReluBackward0", "backward"): 2 * STEPS,
        ("train_step", "user_scope"): STEPS,
        ("Optimizer.step#SGD.step", "user_scope"): STEPS,
        ("Optimizer.zero_grad#SGD.zero_grad", "user_scope"): STEPS,
    }
    for (name, kind), calls in expected.items():
        op = find(ops, name)
        assert (op["kind"], op["calls"], oracle[name]) == (kind, calls, calls), name
    loader = find(ops, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert loader["kind"] == "user_scope" and loader["calls"] >= STEPS
    backward = [op for op in ops if op["kind"] == "backward"]
    assert len(backward) >= 8
    for op in backward:
        assert op["calls"] == oracle[op["name"]], op["name"]


def test_self_time_never_exceeds_total_time(runs):
    for op in runs["profile"]["ops"]:
        assert op["calls"] > 0, op["name"]
        assert 0 <= op["self_ms"] <= op["total_ms"] + 1e-6, op
    # A scope that only wraps other ops spends most of its time in them.
    step = find(runs["profile"]["ops"], "train_step")
    assert step["self_ms"] < step["total_ms"]


def test_top_operator_has_sampled_shapes(runs):
    operators = [op for op in runs["profile"]["ops"] if op["kind"] == "operator"]
    top = max(operators, key=lambda op: op["self_ms"])
    # Runs every step, so the 5 % shape sample cannot miss it (0.95**300).
    assert top["calls"] >= STEPS, top
    shapes = top["shapes"]
    assert shapes, top
    counts = [s["count"] for s in shapes]
    assert all(c > 0 for c in counts) and sum(counts) <= top["calls"]
    assert counts == sorted(counts, reverse=True)
    assert all(isinstance(s["shapes"], str) and s["shapes"] for s in shapes)


def test_shape_signature_names_input_shapes_and_dtypes(runs):
    conv = find(runs["profile"]["ops"], "aten::convolution")
    signatures = [s["shapes"] for s in conv["shapes"]]
    # First conv layer: input [8, 3, 16, 16], weight [8, 3, 3, 3], bias [8].
    first = [s for s in signatures if s.startswith("[[8, 3, 16, 16], [8, 3, 3, 3], [8], ")]
    assert first, signatures
    assert first[0].endswith("] float,float,float"), first
