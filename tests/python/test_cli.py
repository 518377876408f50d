"""The script runs as `python SCRIPT` / `python -m MODULE` would run it, once,
and the environment facts in the report are the script's own."""

import json
import os
import subprocess

from conftest import PYTHON, ROOT, SCRIPTS, load_profile, run_plain, run_tool, script


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
    assert load_profile(str(tmp_path / "torchneck-out" / runs[0]))["schema"] == "torchneck.profile/1"


def test_script_runs_once(tmp_path):
    counter = tmp_path / "count"
    target = tmp_path / "once.py"
    target.write_text(f"with open({str(counter)!r}, 'a') as f: f.write('x')\n")
    for mode in ("sample", "trace", "off"):
        counter.write_text("")
        assert run_tool([f"--python={mode}", "-o", str(tmp_path / mode), str(target)]).returncode == 0
        assert counter.read_text() == "x"
