"""Exit status and report for each way a script can end: the status is what
plain Python gives for the same script (the oracle), and the report is
written every time."""

import os
import signal
import subprocess
import time

import pytest

from conftest import PYTHON, ROOT, TOOL, load_profile, run_plain, run_tool, script


def _start_and_wait_ready(cmd, **kw):
    """CMD (endings.py wait) started, once it says it is ready; its stdin a
    pipe that communicate() closes, which ends the script's wait."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    line, deadline = "", time.monotonic() + 120
    while "ready" not in line and time.monotonic() < deadline:
        line = p.stdout.readline()
    assert "ready" in line
    return p


ENDINGS = {"ok": "finished", "raise": "exception", "exit3": "sys.exit", "exitstr": "sys.exit",
           "osexit": "os._exit", "sigint": "KeyboardInterrupt", "segv": "fatal signal SIGSEGV",
           "segv_faulthandler": "fatal signal SIGSEGV", "abort": "fatal signal SIGABRT"}


@pytest.mark.parametrize("how", list(ENDINGS))
def test_exit_status_matches_plain_python_and_report_is_written(how, tmp_path):
    plain = run_plain([script("endings.py"), how])
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, script("endings.py"), how])
    assert r.returncode == plain.returncode, (how, r.stderr)
    assert r.stdout == plain.stdout
    prof = load_profile(out)
    assert prof["run"]["argv"][1:] == [how]
    assert any(op["name"] == "aten::mm" and op["calls"] == 5 for op in prof["ops"])
    assert "Operators, top" in r.stderr
    expected_code = plain.returncode if plain.returncode >= 0 else 128 - plain.returncode
    assert prof["run"]["exit_code"] == expected_code
    assert prof["run"]["ending"] == ENDINGS[how]
    # the report can always be rebuilt from the spill the run leaves
    again = subprocess.run([TOOL, "report", out], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "Operators, top" in again.stdout
    assert load_profile(out)["ops"] == prof["ops"]


def test_faulthandler_of_the_script_still_prints_its_traceback(tmp_path):
    out = str(tmp_path / "out")
    r = run_tool(["-o", out, script("endings.py"), "segv_faulthandler"])
    assert r.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in r.stderr
    assert "died by SIGSEGV" in r.stderr


def test_kill_9_leaves_a_spill_that_report_turns_into_the_full_report(tmp_path):
    # GIVEN a run killed with SIGKILL after it did its work (5 aten::mm calls)
    out = tmp_path / "out"
    p = _start_and_wait_ready([TOOL, "run", "-o", str(out), script("endings.py"), "wait"])
    ready_at = time.time()
    spill = out / "profile.spill"
    deadline = time.monotonic() + 60
    # a periodic spill taken after the work (1 s in, then 3 s, 7 s, ...)
    while not (spill.exists() and spill.stat().st_mtime > ready_at + 0.2) and time.monotonic() < deadline:
        time.sleep(0.1)
    p.kill()
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert not (out / "profile.json").exists()  # nothing was written at the end
    # WHEN the report is rebuilt
    r = subprocess.run([TOOL, "report", str(out)], capture_output=True, text=True, timeout=300)
    # THEN it has everything collected until the last spill
    assert r.returncode == 0, r.stderr
    assert "no final report" in r.stdout
    prof = load_profile(str(out))
    assert prof["run"]["ending"] == "still running"
    assert prof["run"]["argv"][1:] == ["wait"]
    assert [op["calls"] for op in prof["ops"] if op["name"] == "aten::mm"] == [5]
    assert prof["run"]["wall_s"] > 0.5


def test_report_of_a_damaged_spill_is_a_one_line_error(tmp_path):
    out = tmp_path / "out"
    r = run_tool(["-o", str(out), script("endings.py"), "ok"])
    assert r.returncode == 0
    data = (out / "profile.spill").read_bytes()
    for cut in (0, 7, 12, len(data) // 3, len(data) - 1):
        (out / "profile.spill").write_bytes(data[:cut])
        r = subprocess.run([TOOL, "report", str(out)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (cut, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("torchneck: ") and "profile.spill" in lines[0], r.stderr


@pytest.mark.parametrize("args", [[], ["a", "b"], ["--bogus"], ["/no/such/folder"]])
def test_report_bad_invocations(args, tmp_path):
    r = subprocess.run([TOOL, "report", *args], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1


def test_uncaught_exception_shows_the_scripts_traceback(tmp_path):
    r = run_tool(["-o", str(tmp_path / "o"), script("endings.py"), "raise"])
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "ValueError: planted failure" in r.stderr
    assert "endings.py" in r.stderr
    # the launcher's own frames are not shown
    assert "runner.py" not in r.stderr.split("ValueError")[0]
    # the traceback comes before the report
    assert r.stderr.index("ValueError: planted failure") < r.stderr.index("torchneck ====")


def test_sys_exit_with_message_prints_it(tmp_path):
    r = run_tool(["-o", str(tmp_path / "o"), script("endings.py"), "exitstr"])
    assert r.returncode == 1
    assert "stopping with a message" in r.stderr


def test_sigint_from_outside_gives_pythons_status_and_a_report(tmp_path):
    out = str(tmp_path / "out")
    p = _start_and_wait_ready([TOOL, "run", "-o", out, script("endings.py"), "wait"])
    p.send_signal(signal.SIGINT)
    _out, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGINT  # killed by SIGINT, as python is
    assert "KeyboardInterrupt" in err
    assert load_profile(out)["run"]["exit_code"] == 128 + signal.SIGINT


def test_sigterm_gives_the_default_death_and_still_a_report(tmp_path):
    # GIVEN the status plain Python gets when SIGTERM arrives (the oracle)
    def run_and_term(cmd):
        p = _start_and_wait_ready(cmd)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=120)
        return p.returncode
    plain = run_and_term([PYTHON, script("endings.py"), "wait"])
    out = str(tmp_path / "out")
    got = run_and_term([TOOL, "run", "-o", out, script("endings.py"), "wait"])
    # THEN torchneck dies the same way, after writing the report
    assert plain == -signal.SIGTERM
    assert got == plain
    prof = load_profile(out)
    assert prof["run"]["exit_code"] == 128 + signal.SIGTERM
    assert any(op["name"] == "aten::mm" for op in prof["ops"])


def _no_core_dump():
    """SIGQUIT's default action dumps core: not into the test's folders."""
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run_and_signal(cmd, signum, **kw):
    """CMD (endings.py wait) sent SIGNUM once it is ready: (exit status, stdout, stderr).
    CMD starts with SIGNUM's default action, as a shell in a terminal gives
    it, whatever this process has (a test runner under nohup ignores SIGHUP)."""
    def default_action():
        _no_core_dump()
        signal.signal(signum, signal.SIG_DFL)

    p = _start_and_wait_ready(cmd, preexec_fn=default_action, **kw)
    p.send_signal(signum)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


@pytest.mark.parametrize("name", ["SIGHUP", "SIGUSR1", "SIGQUIT"])
def test_hangup_user_and_quit_signals_give_the_default_death_and_still_a_report(name, tmp_path):
    # GIVEN the status plain Python gets when the signal arrives (the oracle)
    signum = getattr(signal, name)
    plain, _, _ = _run_and_signal([PYTHON, script("endings.py"), "wait"], signum)
    out = tmp_path / "out"
    got, _, err = _run_and_signal([TOOL, "run", "-o", str(out), script("endings.py"), "wait"], signum)
    # THEN torchneck ends the same way, after writing and showing the report:
    # by the signal, or, where torch's own libraries catch it (Debian 13's
    # torch handles SIGHUP), with the script running on to its end
    assert got == plain, err
    assert "Operators, top" in err
    assert (out / "report.txt").is_file()
    prof = load_profile(str(out))
    if plain == -signum:
        assert prof["run"]["exit_code"] == 128 + signum
        assert prof["run"]["ending"] == name
    else:
        assert prof["run"]["ending"] == "finished", prof["run"]
    assert [op["calls"] for op in prof["ops"] if op["name"] == "aten::mm"] == [5]


def test_a_scripts_own_sigusr1_handler_is_left_alone(tmp_path):
    # GIVEN a script that handles SIGUSR1 itself and goes on to its end
    own = tmp_path / "own_handler.py"
    own.write_text("import signal, time\n"
                   "got = []\n"
                   "signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))\n"
                   "print('ready', flush=True)\n"
                   "deadline = time.monotonic() + 60\n"
                   "while not got and time.monotonic() < deadline:\n"
                   "    time.sleep(0.05)\n"
                   "print('handled', got, flush=True)\n")
    plain = _run_and_signal([PYTHON, str(own)], signal.SIGUSR1)
    out = tmp_path / "out"
    got = _run_and_signal([TOOL, "run", "-o", str(out), str(own)], signal.SIGUSR1)
    # THEN its handler runs and the run ends as it does under plain Python
    assert plain[:2] == (0, f"handled [{int(signal.SIGUSR1)}]\n")  # after "ready", which the wait read
    assert got[:2] == plain[:2], got[2]
    assert load_profile(str(out))["run"]["ending"] == "finished"


def test_sighup_ignored_by_the_caller_stays_ignored(tmp_path):
    # GIVEN SIGHUP ignored when the script starts (nohup): plain Python lives on
    def ignoring_sighup():
        _no_core_dump()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def run_and_hang_up(cmd):
        p = _start_and_wait_ready(cmd, preexec_fn=ignoring_sighup)
        p.send_signal(signal.SIGHUP)
        p.send_signal(signal.SIGINT)  # ends the wait: the script gets a KeyboardInterrupt
        p.communicate(timeout=120)
        return p.returncode
    plain = run_and_hang_up([PYTHON, script("endings.py"), "wait"])
    out = tmp_path / "out"
    got = run_and_hang_up([TOOL, "run", "-o", str(out), script("endings.py"), "wait"])
    assert plain == -signal.SIGINT
    assert got == plain
    assert load_profile(str(out))["run"]["ending"] == "KeyboardInterrupt"


@pytest.mark.parametrize("case", ["missing", "directory", "syntax", "nul", "bad_output", "no_module"])
def test_bad_target_is_one_line_error_exit_2_before_the_script_starts(case, tmp_path):
    marker = tmp_path / "started"
    env = dict(os.environ, MARKER=str(marker))
    out = str(tmp_path / "out")
    if case == "missing":
        args = ["-o", out, str(tmp_path / "nope.py")]
    elif case == "directory":
        args = ["-o", out, str(tmp_path)]
    elif case == "syntax":
        bad = tmp_path / "bad.py"
        bad.write_text("import os\nopen(os.environ['MARKER'], 'w')\ndef f(:\n")
        args = ["-o", out, str(bad)]
    elif case == "nul":
        bad = tmp_path / "nul.py"
        bad.write_bytes(b"x = 1\0\n")
        args = ["-o", out, str(bad)]
    elif case == "bad_output":
        blocker = tmp_path / "file"
        blocker.write_text("")
        args = ["-o", str(blocker / "sub"), script("marker.py")]
    else:
        args = ["-m", "no_such_module_xyz"]
    r = run_tool(args, env=env, cwd=str(tmp_path))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchneck: "), r.stderr
    assert not marker.exists()
    assert not os.path.exists(out)


@pytest.mark.parametrize("args", [["--bogus", "x.py"], ["--python=fast", "x.py"], ["--top", "x"], []])
def test_bad_options_are_one_line_errors(args):
    r = run_tool(args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_native_extension_is_a_one_line_error(tmp_path):
    # GIVEN the Python package without its built extension
    import shutil
    pkg = tmp_path / "pkg" / "torchneck"
    shutil.copytree(os.path.join(ROOT, "python", "torchneck"), pkg,
                    ignore=shutil.ignore_patterns("_torchneck*.so", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"))
    r = subprocess.run([PYTHON, "-m", "torchneck", "-o", str(tmp_path / "out"), script("marker.py")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "make build" in lines[0], r.stderr
    assert not (tmp_path / "out").exists()
