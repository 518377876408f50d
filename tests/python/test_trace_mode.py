"""--python=trace must count exactly what cProfile counts."""

import os
import pstats

from conftest import PYTHON, run_plain, run_tool, script


def script_rows(stats, path):
    """{(line, name): (primitive calls, total calls)} for the functions of `path`."""
    rows = {}
    for (file, line, name), (cc, nc, _tt, _ct, _callers) in stats.stats.items():
        if os.path.abspath(file) == path:
            rows[(line, name)] = (cc, nc)
    return rows


def test_ncalls_equal_cprofile_for_every_function(tmp_path):
    target = script("deterministic.py")
    # GIVEN cProfile's counts for every thread of the script (the oracle)
    oracle_file = str(tmp_path / "oracle.pstats")
    r = run_plain([script("cprofile_all_threads.py"), oracle_file, target])
    assert r.returncode == 0, r.stderr
    expected = script_rows(pstats.Stats(oracle_file), target)
    # WHEN the same script runs under torchneck's tracer
    out = str(tmp_path / "out")
    r = run_tool(["--python=trace", "-o", out, target])
    assert r.returncode == 0, r.stderr
    # THEN python.pstats loads with pstats and has the same counts
    got = script_rows(pstats.Stats(os.path.join(out, "python.pstats")), target)
    assert expected, "the oracle saw no function of the script"
    assert {k for k in expected} == {k for k in got}
    for key, counts in expected.items():
        assert got[key] == counts, f"{key}: cProfile {counts}, torchneck {got[key]}"
    # recursion shows as total/primitive, as cProfile prints it
    fib = [v for (line, name), v in got.items() if name == "fib"][0]
    assert fib[1] > fib[0] >= 1
    # the thread's function was traced (it was started after profiling began)
    assert any(name == "in_thread" for (_line, name) in got)


def test_builtin_calls_named_and_counted_as_cprofile(tmp_path):
    target = script("deterministic.py")
    oracle_file = str(tmp_path / "oracle.pstats")
    assert run_plain([script("cprofile_all_threads.py"), oracle_file, target]).returncode == 0
    out = str(tmp_path / "out")
    assert run_tool(["--python=trace", "-o", out, target]).returncode == 0
    want = pstats.Stats(oracle_file).stats
    got = pstats.Stats(os.path.join(out, "python.pstats")).stats
    # list.append is called only by Accumulator.add (200 + 50 times): compare
    # that caller edge, which launcher code cannot touch.
    key = ("~", 0, "<method 'append' of 'list' objects>")
    assert key in want and key in got
    def from_add(stats):
        return {c[2]: v[0] for c, v in stats[key][4].items() if c[2] == "add"}
    assert from_add(got) == from_add(want) == {"add": 250}


def test_trace_report_has_cprofile_columns(tmp_path):
    out = str(tmp_path / "out")
    r = run_tool(["--python=trace", "-o", out, script("deterministic.py")])
    assert r.returncode == 0
    assert "ncalls    tottime    percall    cumtime    percall" in r.stderr
    assert "deterministic.py" in r.stderr and "(fib)" in r.stderr
    # the script's stdout is its own: no report lines in it
    plain = run_plain([script("deterministic.py")])
    assert r.stdout == plain.stdout
