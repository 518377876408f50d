"""The output folder on a shared machine (docs/security.md): no name planted
in it can redirect a write outside it, the Files list names only files that
exist, and two commands never write into one folder at once."""

import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TOOL, run_tool, script

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
TRACE = os.path.join(FIXTURES, "a100_alexnet_sync.trace.json.gz")

# Every file a command writes into its folder, and the probe.
WRITTEN = ["report.html", "trace.json", "profile.json", "stacks.folded", "profile.speedscope.json",
           "report.txt", "python.pstats", "profile.spill"]
ANALYZE_WRITES = [n for n in WRITTEN if n not in ("python.pstats", "profile.spill")]
# The names the temporary files had before they were made fresh:
# FILE.tmp.PID and the probe's .torchneck-write-test-PID.
PREDICTABLE = ["{name}.tmp.{pid}", ".torchneck-write-test-{pid}"]

WAITER = """\
import os, sys, time
open(os.environ["MARKER"], "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.environ["RELEASE"]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def tool(command, args, **kw):
    return subprocess.run([TOOL, command, *args], capture_output=True, text=True, timeout=300, **kw)


def plant_symlinks(folder, victims):
    """A preexec_fn: in the child, whose pid the tool keeps (./torchneck
    execs), links every predictable temporary name in FOLDER to a victim
    file outside it."""
    def plant():
        pid = os.getpid()
        for name in WRITTEN:
            for pattern in PREDICTABLE:
                link = os.path.join(folder, pattern.format(name=name, pid=pid))
                if not os.path.lexists(link):
                    os.symlink(victims[name], link)
    return plant


def make_victims(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {}
    for name in WRITTEN:
        v = outside / f"victim-{name}"
        v.write_text("the victim's own content\n")
        victims[name] = str(v)
    return victims


def assert_victims_untouched(victims):
    for v in victims.values():
        with open(v) as f:
            assert f.read() == "the victim's own content\n", f"{v} was written through a planted link"


def assert_regular_files(folder):
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if name in WRITTEN:
            assert not os.path.islink(path) and os.path.isfile(path), f"{path} is not a regular file"


def files_listed(report_text):
    """The paths the report's Files section names."""
    section = report_text[report_text.rindex("\nFiles\n") + len("\nFiles\n"):]
    paths = []
    for line in section.splitlines():
        if not line.startswith("  ") or line.startswith("  not written: "):
            continue
        paths.append(line.split()[0])
    return paths


def test_analyze_does_not_write_through_planted_names(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    victims = make_victims(tmp_path)
    r = tool("analyze", ["-o", str(shared), TRACE], preexec_fn=plant_symlinks(str(shared), victims))
    assert r.returncode == 0, r.stderr
    assert_victims_untouched(victims)
    assert_regular_files(shared)
    for path in files_listed(r.stdout):
        assert os.path.isfile(path) and not os.path.islink(path), path


def test_run_and_report_do_not_write_through_planted_names(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    victims = make_victims(tmp_path)
    r = run_tool(["-o", str(shared), script("deterministic.py")], preexec_fn=plant_symlinks(str(shared), victims))
    assert r.returncode == 0, r.stderr
    assert_victims_untouched(victims)
    assert_regular_files(shared)
    r = tool("report", [str(shared)], preexec_fn=plant_symlinks(str(shared), victims))
    assert r.returncode == 0, r.stderr
    assert_victims_untouched(victims)
    assert_regular_files(shared)


def test_a_final_name_that_is_a_symlink_is_replaced_not_followed(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    victims = make_victims(tmp_path)
    for name in ANALYZE_WRITES:
        os.symlink(victims[name], shared / name)
    r = tool("analyze", ["-o", str(shared), TRACE])
    assert r.returncode == 0, r.stderr
    assert_victims_untouched(victims)
    assert_regular_files(shared)


def blocked(folder, name):
    """NAME in FOLDER made a folder that holds a file: it cannot be
    replaced by a file, so that one write fails and the others do not."""
    os.makedirs(os.path.join(folder, name, "in the way"))


@pytest.mark.parametrize("name", ["trace.json", "report.html"])
def test_analyze_names_only_the_files_it_wrote(name, tmp_path):
    out = tmp_path / "out"
    blocked(out, name)
    r = tool("analyze", ["-o", str(out), TRACE])
    assert r.returncode == 2
    listed = files_listed(r.stdout)
    assert listed, r.stdout
    for path in listed:
        assert os.path.isfile(path), f"the report names {path}, which was not written"
    assert os.path.join(str(out), name) not in listed
    assert f"not written: {name}: " in r.stdout
    errors = [line for line in r.stderr.splitlines() if line.startswith("torchneck: ")]
    assert len(errors) == 1 and f"{out}/{name}" in errors[0], r.stderr
    with open(out / "report.txt") as f:
        assert files_listed(f.read()) == listed


def test_run_names_only_the_files_it_wrote_and_keeps_the_exit_status(tmp_path):
    out = tmp_path / "out"
    blocked(out, "report.html")
    r = run_tool(["-o", str(out), script("deterministic.py")])
    assert r.returncode == 0, r.stderr
    listed = files_listed(r.stderr)
    for path in listed:
        assert os.path.isfile(path), f"the report names {path}, which was not written"
    assert os.path.join(str(out), "trace.json") in listed  # the files after the failed one are still written
    assert "not written: report.html: " in r.stderr


def wait_for(path, proc, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_folder_in_use_is_refused_before_the_second_script_starts(tmp_path):
    out = tmp_path / "out"
    waiter = tmp_path / "waiter.py"
    waiter.write_text(WAITER)
    first_marker, second_marker, release = tmp_path / "first", tmp_path / "second", tmp_path / "release"
    env = dict(os.environ, MARKER=str(first_marker), RELEASE=str(release))
    first = subprocess.Popen([TOOL, "run", "-o", str(out), str(waiter)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(first_marker, first)
        second = run_tool(["-o", str(out), str(waiter)], env=dict(env, MARKER=str(second_marker)))
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("torchneck: ") and "another torchneck" in lines[0], second.stderr
        assert not second_marker.exists(), "the second script started"
        analyzed = tool("analyze", ["-o", str(out), TRACE])
        assert analyzed.returncode == 2 and "another torchneck" in analyzed.stderr, analyzed.stderr
    finally:
        release.touch()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert str(waiter) in (out / "report.txt").read_text() or "waiter.py" in (out / "report.txt").read_text()
    # Once the first has ended, the folder is free again.
    again = run_tool(["-o", str(out), str(waiter)], env=dict(env, MARKER=str(second_marker)))
    assert again.returncode == 0, again.stderr
    assert second_marker.exists()


def test_on_a_full_disk_the_report_names_no_file_that_is_not_there(tmp_path):
    from test_invocations import run_on_full_disk
    out = tmp_path / "out"
    _plain, got = run_on_full_disk(tmp_path, 0, out)
    for path in files_listed(got.stderr):
        assert os.path.isfile(path), f"the report names {path}, which was not written"
    assert "not written: report.html: " in got.stderr


def test_a_planted_workers_folder_link_is_not_written_through(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "workers")
    r = run_tool(["-o", str(out), script("workers_slow_transform.py"), "--start-method", "fork",
                  "--truth", str(tmp_path / "truth"), "--items", "16"])
    assert r.returncode == 0, r.stderr
    assert os.listdir(elsewhere) == [], "a worker wrote through the planted link"
    assert "Traceback" not in r.stderr and "profile was not written" in r.stderr, r.stderr
    assert os.path.isfile(out / "report.txt")
