"""Paths and arguments that are not UTF-8 (the byte 0xff, as a Linux file
name or argv may hold): the script runs with the argv plain Python gives it
(the oracle, run in the same test), the report is written where asked, and
what torchneck prints names such bytes as \\xff, never raw."""

import os
import shutil
import subprocess

from conftest import PYTHON, ROOT, TOOL, load_profile

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")

# Prints what plain Python gives the script: the test compares the two runs' stdout.
ARGV_SCRIPT = b"""\
import sys
import torch
x = torch.ones(8, 8)
for _ in range(5):
    x = torch.mm(x, x) / 8
print(repr(sys.argv))
print(repr(__file__))
"""

SCRIPT_NAME = b"sc\xffript.py"


def escaped(raw):
    """RAW bytes as Python's backslashreplace writes them: b"a\\xff" -> "a\\\\xff"."""
    return raw.decode("utf-8", "backslashreplace")


def run(args, cwd, python=False):
    """./torchneck ARGS (bytes), or plain Python's ARGS with PYTHON; stdout and stderr as bytes."""
    cmd = [os.fsencode(PYTHON) if python else os.fsencode(TOOL), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=300)


def write_script(folder, name=SCRIPT_NAME):
    path = os.path.join(os.fsencode(str(folder)), name)
    with open(path, "wb") as f:
        f.write(ARGV_SCRIPT)
    return path


def assert_ran_as_plain_python(tool, plain):
    assert tool.returncode == plain.returncode == 0, tool.stderr.decode("utf-8", "replace")
    assert tool.stdout == plain.stdout


def assert_never_raw(stderr):
    """0xff is no byte of any UTF-8 text: where it is, a name was printed raw."""
    assert b"\xff" not in stderr, stderr
    assert b"Traceback" not in stderr, stderr.decode("utf-8", "replace")


def test_a_script_path_that_is_not_utf8_runs_and_is_named_escaped(tmp_path):
    write_script(tmp_path)
    plain = run([SCRIPT_NAME, b"a"], tmp_path, python=True)
    out = os.fsencode(str(tmp_path / "out"))
    r = run([b"run", b"-o", out, SCRIPT_NAME, b"a"], tmp_path)
    assert_ran_as_plain_python(r, plain)
    assert_never_raw(r.stderr)
    assert f"Run: {escaped(SCRIPT_NAME)}".encode() in r.stderr
    prof = load_profile(os.fsdecode(out))
    assert prof["run"]["argv"] == [escaped(SCRIPT_NAME), "a"]
    assert any(op["name"] == "aten::mm" and op["calls"] == 5 for op in prof["ops"])


def test_an_output_folder_that_is_not_utf8_gets_the_report(tmp_path):
    script = write_script(tmp_path, b"plain.py")
    out_name = b"out\xff"
    r = run([b"run", b"-o", out_name, script], tmp_path)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert_never_raw(r.stderr)
    out = os.path.join(os.fsencode(str(tmp_path)), out_name)
    for name in (b"profile.json", b"report.txt", b"profile.spill"):
        assert os.path.isfile(os.path.join(out, name)), name
    assert f"{escaped(out_name)}/report.html".encode() in r.stderr
    assert any(op["name"] == "aten::mm" for op in load_profile(os.fsdecode(out))["ops"])


def test_the_default_folder_of_a_script_that_is_not_utf8_is_named_after_it(tmp_path):
    write_script(tmp_path)
    r = run([b"run", SCRIPT_NAME], tmp_path)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert_never_raw(r.stderr)
    folders = os.listdir(os.path.join(os.fsencode(str(tmp_path)), b"torchneck-out"))
    assert len(folders) == 1 and folders[0].startswith(b"sc\xffript-"), folders
    out = os.path.join(os.fsencode(str(tmp_path)), b"torchneck-out", folders[0])
    assert os.path.isfile(os.path.join(out, b"profile.json"))
    assert f"torchneck-out/{escaped(folders[0])}/report.html".encode() in r.stderr


def test_an_argument_that_is_not_utf8_reaches_the_script_as_plain_python_gives_it(tmp_path):
    script = write_script(tmp_path, b"plain.py")
    args = [b"arg\xff", b"\xc3", b"ok\xe2\x82"]  # a lone byte, a truncated sequence
    plain = run([script, *args], tmp_path, python=True)
    out = os.fsencode(str(tmp_path / "out"))
    r = run([b"run", b"-o", out, script, *args], tmp_path)
    assert_ran_as_plain_python(r, plain)
    assert_never_raw(r.stderr)
    assert load_profile(os.fsdecode(out))["run"]["argv"][1:] == [escaped(a) for a in args]


def test_a_missing_script_that_is_not_utf8_is_one_line_naming_it_escaped(tmp_path):
    missing = b"nope\xff.py"
    r = run([b"run", b"-o", b"out", missing], tmp_path)
    assert r.returncode == 2
    assert r.stderr == f"torchneck: cannot run {escaped(missing)}: no such file\n".encode()
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_is_not_utf8_and_cannot_be_made_is_one_line_naming_it_escaped(tmp_path):
    script = write_script(tmp_path, b"plain.py")
    (tmp_path / "file").write_text("")
    out_name = b"file/sub\xff"
    r = run([b"run", b"-o", out_name, script], tmp_path)
    assert r.returncode == 2
    assert_never_raw(r.stderr)
    lines = r.stderr.splitlines()
    said = f"torchneck: cannot write the report to {escaped(out_name)}: ".encode()
    assert len(lines) == 1 and lines[0].startswith(said), r.stderr


def test_report_rebuilds_a_folder_that_is_not_utf8(tmp_path):
    script = write_script(tmp_path, b"plain.py")
    out_name = b"out\xff"
    first = run([b"run", b"-o", out_name, script], tmp_path)
    assert first.returncode == 0, first.stderr.decode("utf-8", "replace")
    out = os.path.join(os.fsencode(str(tmp_path)), out_name)
    ops = load_profile(os.fsdecode(out))["ops"]
    r = run([b"report", out_name], tmp_path)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert_never_raw(r.stdout + r.stderr)
    assert b"Operators, top" in r.stdout
    assert load_profile(os.fsdecode(out))["ops"] == ops


def test_analyze_through_the_python_launcher_takes_paths_that_are_not_utf8(tmp_path):
    # `./torchneck analyze` is the native binary; `python -m torchneck analyze`
    # reads the options in Python first, then hands the same bytes to it.
    trace = os.path.join(os.fsencode(str(tmp_path)), b"tr\xffce.json")
    shutil.copyfile(os.path.join(FIXTURES, "backward_thread.trace.json"), trace)
    out = os.path.join(os.fsencode(str(tmp_path)), b"out\xff")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([os.fsencode(PYTHON), b"-m", b"torchneck", b"analyze", b"-o", out, trace],
                       capture_output=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in r.stderr
    assert os.path.isfile(os.path.join(out, b"profile.json"))
