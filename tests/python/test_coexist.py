"""Coexistence: a script that uses its own profilers (torch.profiler,
torch.autograd.profiler, cProfile, sys.setprofile, threading.setprofile),
threads, multiprocessing, `if __name__ == "__main__":`, -m with relative
imports, stdin or os.chdir keeps working under torchneck.

GIVEN the same script run under plain Python (the oracle)
WHEN it runs under `torchneck run`
THEN its own output and exit status are the same, profile.json and the
report are written, and profile.json's notes say which collector stood
aside (or ran alongside) and from where; a script that uses none of these
tools gets none of those notes.

Already covered elsewhere: -m with a relative import (test_cli), threads
under the sampler and the tracer (test_sampler, test_trace_mode)."""

import json
import os

import pytest

from conftest import SCRIPTS, load_profile, run_plain, run_tool, script

# Words only the coexistence guard's notes contain.
GUARD_WORDS = ("stood aside", "was active during the run", "own profile function", "own cProfile")


def guard_notes(prof):
    return [n for n in prof["notes"] if any(w in n for w in GUARD_WORDS)]


def line_of(name, text, nth=1):
    """Line number of the nth line of scripts/NAME containing TEXT: where the
    script itself calls the tool (the notes must point there)."""
    with open(script(name)) as f:
        hits = [i for i, line in enumerate(f, 1) if text in line]
    return hits[nth - 1]


def run_both(tmp_path, args, mode="sample", cwd=None, input=None):
    """Plain Python, then torchneck with -o as an absolute path; checks what
    every coexistence case must keep, returns (plain output, profile)."""
    plain = run_plain(args, cwd=cwd, input=input)
    out = str(tmp_path / f"out-{mode}")
    got = run_tool([f"--python={mode}", "-o", out, *args], cwd=cwd, input=input)
    assert plain.returncode == 0, plain.stderr
    assert got.returncode == plain.returncode, got.stderr
    assert json.loads(got.stdout) == json.loads(plain.stdout), got.stderr
    assert "torchneck ====" in got.stderr
    assert os.path.isfile(os.path.join(out, "report.txt"))
    return json.loads(plain.stdout), load_profile(out)


def python_calls(prof, function):
    """Calls the tracer counted for FUNCTION of a coexist_* script."""
    return sum(f["calls"] for f in prof["python"]
               if f["function"] == function and os.path.basename(f["file"]).startswith("coexist_"))


@pytest.mark.parametrize("mode,how", [("sample", "profiler"), ("sample", "autograd"),
                                      ("trace", "schedule"), ("trace", "stack")])
def test_torch_profilers_keep_working_and_are_noted(mode, how, tmp_path):
    name = "coexist_torch_profiler.py"
    plain, prof = run_both(tmp_path, [script(name), how], mode)
    assert plain["counts"]["aten::mm"] > 0  # the script's profiler saw its operators
    # the note points at the line where the script's profiler started recording
    started = {"profiler": line_of(name, "with torch.profiler.profile", 2),
               "stack": line_of(name, "with torch.profiler.profile", 2),
               "autograd": line_of(name, "with torch.autograd.profiler.profile"),
               "schedule": line_of(name, "prof.step()")}[how]
    tool = "torch.autograd.profiler" if how == "autograd" else "torch.profiler"
    notes = guard_notes(prof)
    assert f"{tool} was active during the run (from {name}:{started})" in notes[0], notes
    # the operator observer still counted the script's operators
    assert any(op["name"] == "aten::mm" and op["calls"] >= plain["counts"]["aten::mm"] for op in prof["ops"])
    if how == "stack":
        # torch's own Python tracer took every thread; ours came back on the
        # main thread when the script's profiler ended
        aside = [n for n in notes if n.startswith("python tracer stood aside on every thread")]
        assert len(aside) == 1 and f"from {name}:{started} until {name}:" in aside[0], notes
    else:
        assert len(notes) == 1, notes
    if mode == "trace":
        assert python_calls(prof, "after_profiling") == plain["after_calls"]


@pytest.mark.parametrize("mode,how", [("trace", "enable"), ("trace", "context"), ("trace", "thread"),
                                      ("sample", "runcall")])
def test_cprofile_keeps_working_and_the_tracer_stands_aside(mode, how, tmp_path):
    name = "coexist_cprofile.py"
    plain, prof = run_both(tmp_path, [script(name), how], mode)
    assert plain["calls"]["fib"][1] > plain["calls"]["fib"][0] >= 1  # cProfile's own counts
    notes = guard_notes(prof)
    assert len(notes) == 1, notes
    start = {"enable": "profiler.enable()", "thread": "profiler.enable()", "context": "with profiler:",
             "runcall": "profiler.runcall(work)"}[how]
    where = f"{name}:{line_of(name, start, 2 if how == 'thread' else 1)}"
    if mode == "trace":
        thread = "profiled" if how == "thread" else "MainThread"
        assert notes[0].startswith(f"python tracer stood aside on thread {thread} from {where} until "), notes
        assert "cProfile" in notes[0]
        # our tracer came back once the script's profiler was disabled
        assert python_calls(prof, "after_profiling") == plain["after_calls"]
    else:
        assert notes[0].startswith(f"the script ran its own cProfile (from {where}, thread MainThread)"), notes


@pytest.mark.parametrize("mode,how", [("trace", "main"), ("trace", "thread"), ("trace", "threading"),
                                      ("trace", "profile"), ("sample", "main")])
def test_setprofile_keeps_working_and_the_tracer_stands_aside(mode, how, tmp_path):
    name = "coexist_setprofile.py"
    plain, prof = run_both(tmp_path, [script(name), how], mode)
    assert sum(plain["seen"].values()) > 0  # the script's function saw its calls
    notes = guard_notes(prof)
    assert len(notes) == 1, notes
    calls = {"threading": "threading.setprofile(counter)", "profile": "prof.runcall("}
    call = calls.get(how, "sys.setprofile(counter)")
    where = f"{name}:{line_of(name, call, 2 if how == 'thread' else 1)}"
    if mode == "sample":
        want = f"the script installed its own profile function (sys.setprofile, from {where}"
        assert notes[0].startswith(want), notes
    elif how == "threading":
        assert notes[0].startswith(f"python tracer stood aside for threads started after {where} until "), notes
    else:
        threads = "thread w" if how == "thread" else "thread MainThread"
        assert notes[0].startswith(f"python tracer stood aside on {threads}"), notes
        assert f"from {where} until " in notes[0] and "(sys.setprofile)" in notes[0]
        if how == "thread":
            assert "(and 1 other thread)" in notes[0]
    if mode == "trace":
        assert python_calls(prof, "after_profiling") == plain["after_calls"]


@pytest.mark.parametrize("mode", ["trace", "sample"])
def test_threads_without_profilers_get_no_coexistence_note(mode, tmp_path):
    plain, prof = run_both(tmp_path, [script("coexist_threads.py")], mode)
    assert len(plain["results"]) == 3
    assert guard_notes(prof) == []
    assert any(op["name"] == "aten::mm" for op in prof["ops"])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_and_main_guard(method, tmp_path):
    plain, _prof = run_both(tmp_path, [script("coexist_multiprocessing.py"), method])
    assert plain["exitcode"] == 3 and len(plain["squares"]) == 8


def test_module_with_relative_import_and_spawned_workers(tmp_path):
    # spawned workers import the -m target's package again, by name
    plain, prof = run_both(tmp_path, ["-m", "coexist_pkg.main", "--flag"], "trace", cwd=SCRIPTS)
    assert plain["name"] == "__main__" and plain["package"] == "coexist_pkg"
    assert prof["run"]["script"] == "-m coexist_pkg.main"


def test_script_reads_stdin(tmp_path):
    text = "first line\nsecond\nthird\n"
    plain, _prof = run_both(tmp_path, [script("coexist_stdin.py")], input=text)
    assert plain["first"] == "first line" and plain["rest"] == ["second", "third"]


def test_script_that_changes_directory_with_a_relative_output_folder(tmp_path):
    # GIVEN -o as a relative path and a script that moves elsewhere
    (tmp_path / "plain").mkdir()
    (tmp_path / "tool").mkdir()
    (tmp_path / "launch").mkdir()
    plain = run_plain([script("coexist_chdir.py"), str(tmp_path / "plain")], cwd=str(tmp_path / "launch"))
    got = run_tool(["-o", "out", script("coexist_chdir.py"), str(tmp_path / "tool")], cwd=str(tmp_path / "launch"))
    # THEN the script's relative writes land where it moved to, as with plain Python
    assert got.returncode == plain.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(plain.stdout)
    assert (tmp_path / "tool" / "result.txt").read_text() == (tmp_path / "plain" / "result.txt").read_text()
    # AND the report lands where -o pointed when the tool started
    out = tmp_path / "launch" / "out"
    assert load_profile(str(out))["run"]["exit_code"] == 0
    assert (out / "report.txt").is_file()
    assert not (tmp_path / "tool" / "out").exists()
    assert f"{out}/profile.json" in got.stderr
