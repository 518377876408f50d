"""The script runs as `python SCRIPT` / `python -m MODULE` would run it, once,
and the environment facts in the report are the script's own; every command
goes through one command line, the same from ./torchneck and from
`python -m torchneck`."""

import json
import os
import subprocess
import sys

import pytest

from conftest import PYTHON, ROOT, SCRIPTS, TOOL, load_profile, run_plain, run_tool, script


def test_script_sees_what_plain_python_gives_it(tmp_path):
    target = script("introspect.py")
    plain = json.loads(run_plain([target, "--lr", "0.1"]).stdout)
    r = run_tool(["-o", str(tmp_path / "o"), target, "--lr", "0.1"])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == plain
    assert got["name"] == "__main__" and got["main_is_me"]
    assert got["argv"] == [target, "--lr", "0.1"]
    assert got["path0"] == SCRIPTS


def test_environment_facts_match_the_script(tmp_path):
    out = str(tmp_path / "o")
    r = run_tool(["-o", out, script("introspect.py")])
    seen = json.loads(r.stdout)
    env = load_profile(out)["env"]
    assert env["cpu_cores"] == seen["affinity"]
    assert env["torch_threads"] == seen["threads"]
    assert env["cuda"] is False
    import platform
    import torch
    assert env["python"] == platform.python_version() and env["torch"] == torch.__version__
    loaders = [[d["num_workers"], d["batch_size"], d["persistent_workers"]] for d in env["dataloaders"]]
    assert loaders == seen["loaders"]
    assert env["dataloaders"][1]["prefetch_factor"] == 3
    assert env["dataloaders"][0]["prefetch_factor"] is None  # no workers: not applicable
    with open(script("introspect.py")) as f:
        line = [i for i, text in enumerate(f, 1) if text.startswith("a = DataLoader")][0]
    assert env["dataloaders"][0]["created_at"] == f"introspect.py:{line}"
    assert "DataLoader #2" in r.stderr and "num_workers=2" in r.stderr


def test_module_target_with_relative_import_and_args(tmp_path):
    plain = subprocess.run([PYTHON, "-m", "pkg.train", "--lr", "0.1"], cwd=SCRIPTS,
                           capture_output=True, text=True)
    r = run_tool(["-o", str(tmp_path / "o"), "-m", "pkg.train", "--lr", "0.1"], cwd=SCRIPTS)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(plain.stdout)
    assert load_profile(str(tmp_path / "o"))["run"]["script"] == "-m pkg.train"


def test_python_dash_m_torchneck_is_a_drop_in_for_bottleneck(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([PYTHON, "-m", "torchneck", script("introspect.py"), "x"], cwd=str(tmp_path),
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["argv"][1:] == ["x"]
    # default output: a fresh folder under ./torchneck-out/
    runs = os.listdir(tmp_path / "torchneck-out")
    assert len(runs) == 1 and runs[0].startswith("introspect-")
    assert load_profile(str(tmp_path / "torchneck-out" / runs[0]))["schema"] == "torchneck.profile/2"


def test_script_runs_once(tmp_path):
    counter = tmp_path / "count"
    target = tmp_path / "once.py"
    target.write_text(f"with open({str(counter)!r}, 'a') as f: f.write('x')\n")
    for mode in ("sample", "trace", "off"):
        counter.write_text("")
        assert run_tool([f"--python={mode}", "-o", str(tmp_path / mode), str(target)]).returncode == 0
        assert counter.read_text() == "x"


# --- one command line for every command (issue 18) ---------------------------

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import cli  # noqa: E402 - the command table, no torch needed


def python_m(args, cwd=None, **kw):
    """python -m torchneck ARGS...: the same commands as ./torchneck."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([PYTHON, "-m", "torchneck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env, **kw)


def wrapper(args, cwd=None):
    return subprocess.run([TOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]])
def test_help_lists_every_command_one_line_each(args):
    for r in (wrapper(args), python_m(args)):
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.split("commands:\n")[1].split("\n\n")[0].splitlines()]
        assert [row[0] for row in rows] == list(cli.COMMANDS)
        assert "analyze" in [row[0] for row in rows]
        assert r.stdout == cli.overview()


@pytest.mark.parametrize("name", ["run", "report"])
def test_a_commands_help_is_its_own(name):
    own = wrapper([name, "--help"])
    assert own.returncode == 0
    assert own.stdout.startswith(f"usage: torchneck {name} ")
    assert own.stdout == wrapper(["help", name]).stdout == python_m([name, "-h"]).stdout
    # its options and no other command's
    for option in cli.COMMANDS[name].options:
        assert option in own.stdout
    assert ("--python=MODE" in own.stdout) == (name == "run")


BAD = [["report"], ["report", "a", "b"], ["report", "--top", "0", "x"], ["report", "--top=3", "--top=4", "x"],
       ["run"], ["run", "--bogus", "x.py"], ["run", "-o=x", "x.py"], ["run", "--top", "3", "--top", "4", "x.py"],
       ["analyze"], ["analyze", "--top=0", "x"], ["analyze", "-o", "a", "--output=b", "x"], ["analyze", "--bogus"],
       ["diff"], ["diff", "a"], ["diff", "--top=0", "a", "b"], ["diff", "--bogus", "a", "b"],
       ["diff", "-o", "a", "--output=b", "x", "y"], ["diff", "--fail-if-slower", "fast", "x", "y"],
       ["diff", "no-such-run", "no-such-either"],
       ["help", "bogus"], ["help", "run", "report"], []]


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) or "(nothing)" for a in BAD])
def test_every_entry_point_refuses_alike(args, tmp_path):
    # ./torchneck analyze runs the native parser, python -m torchneck the Python one
    a, b = wrapper(args, cwd=str(tmp_path)), python_m(args, cwd=str(tmp_path))
    assert a.returncode == b.returncode == 2, (a.stderr, b.stderr)
    assert a.stderr == b.stderr
    assert len(a.stderr.splitlines()) == 1 and a.stderr.startswith("torchneck: "), a.stderr
    assert os.listdir(tmp_path) == []


def test_version():
    from torchneck import __version__
    r = python_m(["--version"])
    assert r.returncode == 0 and r.stdout == f"torchneck {__version__}\n"


def test_a_command_word_means_the_command_even_with_a_file_of_that_name(tmp_path):
    # GIVEN scripts named like the commands in the working directory
    marker = tmp_path / "ran"
    for name in cli.COMMANDS:
        (tmp_path / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    # WHEN the command words are given alone THEN they are the commands
    assert "no script given" in python_m(["run"], cwd=str(tmp_path)).stderr
    assert "report needs an output folder" in python_m(["report"], cwd=str(tmp_path)).stderr
    assert python_m(["help"], cwd=str(tmp_path)).stdout == cli.overview()
    assert not marker.exists()
    # AND such a script runs when named as run's script, after `--`, or by a path
    for args, ran in ((["run", "-o", "o1", "analyze"], "analyze"), (["-o", "o2", "--", "report"], "report"),
                      (["-o", "o3", "./run"], "run")):
        marker.write_text("")
        r = python_m(args, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert marker.read_text() == ran


def test_report_takes_the_same_spellings_as_run(tmp_path):
    out = tmp_path / "o"
    assert run_tool(["--top", "4", "-o", str(out), script("endings.py"), "ok"]).returncode == 0
    spaced = wrapper(["report", "--top", "3", "--trace-steps", "1", str(out)])
    joined = wrapper(["report", "--top=3", "--trace-steps=1", str(out)])
    assert spaced.returncode == joined.returncode == 0, spaced.stderr
    assert spaced.stdout == joined.stdout
    assert "Operators, top 3 by" in spaced.stdout  # the value was read, not the default kept


def test_analyze_without_its_native_binary_is_a_one_line_error(tmp_path):
    # GIVEN the Python package alone, with no build/ next to it
    import shutil
    pkg = tmp_path / "python" / "torchneck"
    shutil.copytree(os.path.join(ROOT, "python", "torchneck"), pkg,
                    ignore=shutil.ignore_patterns("_torchneck*.so", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "python"))
    r = subprocess.run([PYTHON, "-m", "torchneck", "analyze", "trace.json"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("torchneck: torchneck-analyze is not built") and "make build" in r.stderr
    assert len(r.stderr.splitlines()) == 1
