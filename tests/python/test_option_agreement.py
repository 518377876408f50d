"""`torchneck analyze` reads its options natively (no Python start-up), every
other command in Python (options.py): the two parsers must take the same
spellings, refuse the same mistakes with the same words, show the same
help and have the same defaults; and the extension takes every report
option by its name. The same argument lists go through both; the oracle is
the Python parser's verdict, and the native binary must match it."""

import os
import subprocess
import sys

import pytest

from conftest import PYTHON, ROOT

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import cli  # noqa: E402 - the launcher's parser, no torch needed
from torchneck.errors import UsageError  # noqa: E402
from torchneck.options import OPTIONS, REPORT_OPTIONS, HelpRequested, parse  # noqa: E402

NATIVE = os.path.join(ROOT, "build", "torchneck-analyze")
FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
# A small real trace: an accepted command line analyses it in milliseconds.
TRACE = os.path.join(FIXTURES, "old_categories_inference.trace.json.gz")
ANALYZE = cli.COMMANDS["analyze"]

# "T" is the trace, "O" a fresh output folder (relative: both parsers read it
# against the same working directory).
CASES = [
    # accepted spellings
    ["-o", "O", "T"], ["--output", "O", "T"], ["--output=O", "T"], ["T", "-o", "O"],
    ["--top", "3", "-o", "O", "T"], ["--top=3", "-o", "O", "T"], ["-o", "O", "T", "--top", "1000"],
    ["--trace-steps", "0", "-o", "O", "T"], ["--trace-steps=7", "-o", "O", "T"],
    ["--top=5", "--top", "05", "-o", "O", "T"],           # a repeat that says the same
    ["-o", "O", "--output", "./O/", "T"],                  # the same folder spelled twice
    ["--max-trace-size=512M", "-o", "O", "T"], ["--max-trace-size", "20g", "-o", "O", "T"],
    ["--max-trace-size=1048576", "-o", "O", "T"], ["--max-trace-size=1G", "--max-trace-size=1024M", "-o", "O", "T"],
    ["--max-trace-size=0001T", "-o", "O", "T"], ["--max-trace-size=1024T", "-o", "O", "T"],
    ["--max-trace-size=00000000000000000000001M", "-o", "O", "T"],
    ["-o", "O", "--", "T"],
    ["--output", "-", "T"],                                # a folder named "-"
    # refused
    [], ["-o", "O"], ["-o", "O", "T", "T"], ["--bogus", "T"], ["--bogus=1", "T"], ["-o=O", "T"],
    ["-oO", "T"], ["--topx=5", "T"], ["--top5", "T"], ["--help=x", "T"], ["--=x", "T"], ["---top=3", "T"],
    ["--trace_steps=3", "T"],
    ["--top", "x", "T"], ["--top= 5", "T"], ["--top=+5", "T"], ["--top=1_0", "T"], ["--top=", "T"],
    ["--top=0", "T"], ["--top=1001", "T"], ["--top=99999999999999999999", "T"], ["--trace-steps=-1", "T"],
    ["--trace-steps=1000001", "T"], ["T", "--top"], ["T", "-o"], ["-o", "", "T"], ["--output=", "T"],
    ["--max-trace-size=0", "T"], ["--max-trace-size=1025T", "T"], ["--max-trace-size=1P", "T"],
    ["--max-trace-size=5MB", "T"], ["--max-trace-size=-5M", "T"], ["--max-trace-size=+5M", "T"],
    ["--max-trace-size= 5M", "T"], ["--max-trace-size=M", "T"], ["--max-trace-size=", "T"],
    ["--max-trace-size=1.5G", "T"], ["--max-trace-size=99999999999999999999999", "T"],
    ["--max-trace-size=1G", "--max-trace-size=2G", "T"], ["T", "--max-trace-size"], ["--max-trace-size=5\u0661", "T"],
    ["--top=3", "--top=4", "T"], ["--top", "3", "--top", "4", "T"], ["-o", "a", "--output", "b", "T"],
    ["--trace-steps=1", "--trace-steps=2", "T"],
]


def expand(case, out):
    return [TRACE if a == "T" else a.replace("O", out) for a in case]


def python_verdict(argv):
    """(the refusal's message or None, the parsed options or None)"""
    try:
        return None, parse(ANALYZE, argv)
    except UsageError as e:
        return str(e), None


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c) or "(nothing)" for c in CASES])
def test_native_and_python_parsers_agree(case, tmp_path):
    argv = expand(case, "out")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the Python parser reads folders against the working directory too
    try:
        refusal, parsed = python_verdict(argv)
    finally:
        os.chdir(cwd)
    r = subprocess.run([NATIVE, *argv], capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    if refusal is None:
        assert r.returncode == 0, (argv, r.stderr)
        # the report went where the Python parser says it should
        assert (tmp_path / parsed.output / "profile.json").is_file(), (argv, os.listdir(tmp_path))
    else:
        assert r.returncode == 2, (argv, r.stdout)
        assert r.stderr == f"torchneck: {refusal}\n"
        assert not (tmp_path / "out").exists()  # refused before anything was made


def test_the_cases_cover_both_verdicts():
    verdicts = [python_verdict(expand(c, "out"))[0] for c in CASES]
    assert sum(v is None for v in verdicts) >= 10 and sum(v is not None for v in verdicts) >= 20


def test_native_help_is_the_generated_help():
    r = subprocess.run([NATIVE, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert r.stdout == ANALYZE.help()
    assert "--trace-steps=N" in r.stdout and "-o DIR, --output=DIR" in r.stdout


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["-o", "x", "--help", "T"]])
def test_help_anywhere_among_the_options(argv):
    with pytest.raises(HelpRequested):
        parse(ANALYZE, argv)
    r = subprocess.run([NATIVE, *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == ANALYZE.help()


def test_python_dash_m_analyze_execs_the_same_binary(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    via_python = subprocess.run([PYTHON, "-m", "torchneck", "analyze", "--top", "2", "-o", "by-python", TRACE],
                                capture_output=True, text=True, timeout=120, cwd=str(tmp_path), env=env)
    native = subprocess.run([NATIVE, "--top", "2", "-o", "by-native", TRACE], capture_output=True, text=True,
                            timeout=120, cwd=str(tmp_path))
    assert via_python.returncode == native.returncode == 0, via_python.stderr
    assert via_python.stdout.replace("by-python", "by-native") == native.stdout
    assert sorted(os.listdir(tmp_path / "by-python")) == sorted(os.listdir(tmp_path / "by-native"))
    helped = subprocess.run([PYTHON, "-m", "torchneck", "help", "analyze"], capture_output=True, text=True,
                            timeout=60, env=env)
    assert helped.returncode == 0 and helped.stdout == ANALYZE.help()


@pytest.mark.parametrize("name", REPORT_OPTIONS)
def test_native_defaults_are_the_launchers(name, tmp_path):
    # GIVEN a report option (a ReportSettings member on the native side)
    o = OPTIONS[name]
    # WHEN analyze runs without it, and with the launcher's default given
    outputs = []
    for folder, extra in (("plain", []), ("given", [f"{name}={o.default}"])):
        cwd = tmp_path / folder
        cwd.mkdir()
        r = subprocess.run([NATIVE, *extra, "-o", "out", TRACE], capture_output=True, text=True, timeout=120,
                           cwd=str(cwd))
        assert r.returncode == 0, r.stderr
        outputs.append({f: (cwd / "out" / f).read_text().replace(str(cwd), "CWD")
                        for f in ("report.txt", "profile.json", "trace.json")})
    # THEN the outputs are the same: the native default is the launcher's
    assert outputs[0] == outputs[1]


def test_every_report_option_is_a_setting_the_extension_takes(tmp_path):
    import torch  # noqa: F401  (the extension links the libtorch that torch loads)
    from torchneck import _torchneck
    missing, cwd = os.fsencode(str(tmp_path / "none")), os.fsencode(str(tmp_path))
    for name in REPORT_OPTIONS:
        o = OPTIONS[name]
        # taken by its name: the report then fails only for want of a spill
        with pytest.raises(RuntimeError):
            _torchneck.report_from_spill(missing, cwd, {o.dest: o.default})
    with pytest.raises(ValueError):
        _torchneck.report_from_spill(missing, cwd, {"no_such_setting": 1})
