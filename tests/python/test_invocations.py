"""Bad invocations: conflicting or repeated options, an output folder on a
read-only or full file system. Each is one line on stderr starting with
"torchneck: "; one found before the script starts exits 2 and leaves no
output folder behind; one found at the end (the report cannot be written)
keeps the script's exit status and leaves no half-written file.

Unknown options, a missing script, a directory as the script and an output
path under a regular file are in test_endings.py."""

import json
import os
import resource
import signal
import sys

import pytest

from conftest import PYTHON, ROOT, load_profile, run_plain, run_tool, script

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import cli  # noqa: E402 - the launcher's own parser, no torch needed
from torchneck.options import parse  # noqa: E402


def one_error_line(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("torchneck: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def assert_refused_before_start(r, marker, *paths):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchneck: "), r.stderr
    assert not marker.exists(), "the script started"
    for path in paths:
        assert not os.path.exists(path), f"{path} was left behind"


CONFLICTS = [
    (["--python=off", "--sample-hz=100"], "--sample-hz"),
    (["--sample-hz", "50", "--python", "trace"], "--sample-hz"),   # order does not matter
    (["--no-ops", "--timeline-events=10"], "--timeline-events"),
    (["--timeline-events", "10", "--no-ops"], "--timeline-events"),
    (["--top=5", "--top", "7"], "--top"),
    (["--python=trace", "--python=sample"], "--python"),
]


@pytest.mark.parametrize("args,named", CONFLICTS)
def test_conflicting_options_are_refused_before_anything_starts(args, named, tmp_path):
    marker = tmp_path / "started"
    out = tmp_path / "out"
    r = run_tool([*args, "-o", str(out), script("marker.py")], env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker, out)
    assert named in r.stderr


def test_output_folder_given_twice_differently(tmp_path):
    marker = tmp_path / "started"
    a, b = tmp_path / "a", tmp_path / "b"
    r = run_tool(["-o", str(a), "--output", str(b), script("marker.py")],
                 env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker, a, b)


def test_conflicts_also_refused_with_dash_m(tmp_path):
    marker = tmp_path / "started"
    r = run_tool(["--python=off", "--sample-hz=10", "-m", "json.tool"], env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker)


def test_repeating_an_option_with_the_same_value_is_fine(tmp_path):
    marker = tmp_path / "started"
    out = tmp_path / "out"
    r = run_tool(["--top=5", "--top", "5", "-o", str(out), "--output", str(out) + "/", "--python=sample",
                  "--sample-hz=200", script("marker.py")], env=dict(os.environ, MARKER=str(marker)))
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    assert load_profile(str(out))["run"]["exit_code"] == 0


@pytest.mark.parametrize("argv,expected", [
    (["--python=off", "s.py"], {"python_mode": "off", "sample_hz": 200.0}),  # default rate: no conflict
    (["--sample-hz=50", "s.py"], {"python_mode": "sample", "sample_hz": 50.0}),
    (["--no-ops", "--no-ops", "s.py", "--top=1", "--top=2"], {"ops": False, "top": 15,
                                                             "args": ["--top=1", "--top=2"]}),
    (["--top=3", "--", "--python=x"], {"top": 3, "script": "--python=x"}),
])
def test_parse_keeps_what_belongs_to_the_script(argv, expected):
    o = parse(cli.COMMANDS["run"], argv)
    assert {k: getattr(o, k) for k in expected} == expected


def test_the_interpreter_named_first_is_this_one_and_the_script_follows(tmp_path):
    """`torchneck run python train.py`, as with nsys or py-spy: the script
    runs, with its own arguments."""
    marker = tmp_path / "started"
    out = tmp_path / "out"
    r = run_tool(["-o", str(out), PYTHON, script("marker.py"), "--x"], env=dict(os.environ, MARKER=str(marker)))
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    run = load_profile(str(out))["run"]
    assert run["exit_code"] == 0 and run["argv"] == [script("marker.py"), "--x"], run
    o = parse(cli.COMMANDS["run"], [PYTHON, "-m", "json.tool", "a"])
    assert (o.script, o.module, o.args) == (None, "json.tool", ["a"])


@pytest.mark.parametrize("after", [[], ["-u"], ["-m"]])
def test_the_interpreter_without_a_script_is_refused(after, tmp_path):
    out = tmp_path / "out"
    r = run_tool(["-o", str(out), PYTHON, *after])
    assert r.returncode == 2 and not out.exists(), r.stderr
    assert one_error_line(r.stderr) == r.stderr.strip()


def test_another_python_is_refused_with_how_to_profile_it(tmp_path):
    """An interpreter that is not this one (a shim, a virtual environment):
    torchneck's native session is built for the Python it runs in."""
    other = tmp_path / "python3.99"
    other.write_text("#!/bin/sh\necho /elsewhere; echo 3.99.0\n")
    other.chmod(0o755)
    marker = tmp_path / "started"
    out = tmp_path / "out"
    r = run_tool(["-o", str(out), str(other), script("marker.py")], env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker, out)
    assert f"install torchneck in that Python and run `{other} -m torchneck run" in r.stderr, r.stderr


def test_a_script_named_python_stays_the_script(tmp_path):
    own = tmp_path / "python"
    own.write_text("#!/usr/bin/env python3\nimport os\nopen(os.environ['MARKER'], 'w').close()\n")
    marker = tmp_path / "started"
    out = tmp_path / "out"
    r = run_tool(["-o", str(out), "python"], cwd=str(tmp_path), env=dict(os.environ, MARKER=str(marker)))
    assert r.returncode == 0, r.stderr
    assert marker.exists()


def read_only_targets():
    """Paths no one can create a folder in, even root: procfs and sysfs."""
    paths = []
    if os.path.isdir("/proc/self"):
        paths += ["/proc/torchneck-test/out", "/proc"]
    if os.path.isdir("/sys/kernel"):
        paths += ["/sys/torchneck-test", "/sys/kernel"]
    return paths


@pytest.mark.parametrize("target", read_only_targets())
def test_output_on_a_read_only_file_system(target, tmp_path):
    marker = tmp_path / "started"
    existed = os.path.exists(target)
    r = run_tool(["-o", target, script("marker.py")], env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker)
    assert target in r.stderr and "cannot write" in r.stderr
    assert os.path.exists(target) == existed
    if existed:
        assert not any(name.startswith(".torchneck") for name in os.listdir(target))


def test_folders_made_for_a_failed_output_are_removed_and_older_ones_kept(tmp_path):
    # GIVEN an empty folder that was there before, and an output path below it
    # whose last component cannot be created (too long a name)
    marker = tmp_path / "started"
    parent = tmp_path / "existing"
    parent.mkdir()
    out = parent / "new" / "deeper" / ("x" * 300)
    r = run_tool(["-o", str(out), script("marker.py")], env=dict(os.environ, MARKER=str(marker)))
    assert_refused_before_start(r, marker, parent / "new")
    assert parent.is_dir()


JOB = "import sys\nprint('trained')\nsys.exit(int(sys.argv[1]))\n"


def limited(nbytes):
    """Runs the child with files limited to NBYTES (a full disk as seen by
    one process): the folder's probe write fits, the report does not."""
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    return apply


def run_on_full_disk(tmp_path, code, out):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    # no bytecode files: a truncated .pyc would outlive the test
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    plain = run_plain([str(job), str(code)], env=env, preexec_fn=limited(64))
    got = run_tool(["-o", str(out), str(job), str(code)], env=env, preexec_fn=limited(64))
    return plain, got


def assert_nothing_half_written(folder):
    if not os.path.exists(folder):
        return
    for name in os.listdir(folder):
        assert ".tmp" not in name and not name.startswith("."), name
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                json.load(f)  # complete, or not there at all


@pytest.mark.parametrize("code", [0, 3])
def test_full_disk_at_the_end_keeps_the_scripts_exit_status(code, tmp_path):
    out = tmp_path / "out"
    plain, got = run_on_full_disk(tmp_path, code, out)
    assert plain.returncode == code
    # THEN the script's own status and output, and one line saying what failed
    assert got.returncode == plain.returncode, got.stderr
    assert got.stdout == plain.stdout
    assert one_error_line(got.stderr).startswith(f"torchneck: cannot write {out}/")
    assert_nothing_half_written(out)


def test_full_disk_keeps_an_existing_output_folder(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    plain, got = run_on_full_disk(tmp_path, 0, out)
    assert got.returncode == plain.returncode == 0
    one_error_line(got.stderr)
    assert (out / "notes.txt").read_text() == "the user's"
    assert_nothing_half_written(out)


def test_full_disk_still_prints_the_terminal_report(tmp_path):
    _plain, got = run_on_full_disk(tmp_path, 0, tmp_path / "out")
    assert "torchneck ====" in got.stderr
