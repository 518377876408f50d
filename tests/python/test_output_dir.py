"""Output folders: one implementation (src/report/output_dir.h), used by
`analyze` natively and by `run` through the extension. Its default name, the
folders it makes and removes, and its one-line refusal, seen through the
extension and through both commands."""

import gzip
import os
import re
import subprocess
import sys

import pytest
import torch  # noqa: F401 - the extension links the libtorch torch loads

from conftest import ROOT, TOOL, run_tool, script

sys.path.insert(0, os.path.join(ROOT, "python"))
from torchneck import _torchneck  # noqa: E402

FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures", "kineto")
TRACE = os.path.join(FIXTURES, "old_categories_inference.trace.json.gz")
STAMP = r"\d{8}-\d{6}"


@pytest.mark.parametrize("target,stem", [
    ("train.py", "train"), ("dir/train.py", "train"), ("x.pt.trace.json.gz", "x"), ("rank0.json", "rank0"),
    ("traces/", "traces"), ("a/traces//", "traces"), ("pkg.train", "pkg.train"), ("notes.txt", "notes.txt"),
    ("/", "run"), (".", "run"), ("", "run"), (".py", ".py"),
])
def test_the_stem_is_the_name_without_what_says_its_kind(target, stem):
    assert _torchneck.output_stem(target) == stem


@pytest.fixture
def in_tmp(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


def test_default_folders_never_collide(in_tmp):
    first = _torchneck.prepare_output_dir("", "dir/train.py")
    assert re.fullmatch(f"torchneck-out/train-{STAMP}", first["shown"]), first
    assert first["absolute"] == str(in_tmp / first["shown"])
    assert first["created"] == [str(in_tmp / "torchneck-out"), first["absolute"]]
    second = _torchneck.prepare_output_dir("", "train.py")
    assert second["shown"] != first["shown"]
    if second["shown"].startswith(first["shown"]):  # the same second: numbered
        assert second["shown"] == first["shown"] + "-2"
    assert second["created"] == [second["absolute"]]  # torchneck-out was there already
    assert os.listdir(first["absolute"]) == []  # the write probe is gone


def test_a_given_folder_and_its_missing_parents_are_made(in_tmp):
    (in_tmp / "have").mkdir()
    d = _torchneck.prepare_output_dir("have/new/./deep/../out/", "ignored.py")
    assert d["shown"] == "have/new/./deep/../out/"
    assert d["absolute"] == str(in_tmp / "have" / "new" / "out")
    assert d["created"] == [str(in_tmp / "have" / "new"), str(in_tmp / "have" / "new" / "out")]
    assert os.path.isdir(d["absolute"]) and not (in_tmp / "have" / "new" / "deep").exists()


def test_a_refusal_names_the_folder_and_leaves_nothing(in_tmp):
    (in_tmp / "file").write_text("")
    with pytest.raises(RuntimeError, match=f"^cannot write the report to file/sub: {re.escape(str(in_tmp))}/file is not a folder$"):
        _torchneck.prepare_output_dir("file/sub", "x.py")
    (in_tmp / "kept").mkdir()
    too_long = "kept/new/" + "x" * 300
    with pytest.raises(RuntimeError, match=f"^cannot write the report to {too_long}: File name too long$"):
        _torchneck.prepare_output_dir(too_long, "x.py")
    assert sorted(os.listdir(in_tmp)) == ["file", "kept"] and os.listdir(in_tmp / "kept") == []


def test_removal_keeps_a_folder_with_files_and_what_is_above_it(in_tmp):
    d = _torchneck.prepare_output_dir("a/b/c", "x.py")
    (in_tmp / "a" / "b" / "c" / "report.txt").write_text("half")
    _torchneck.remove_created(d["created"])
    assert (in_tmp / "a" / "b" / "c" / "report.txt").exists()
    os.remove(in_tmp / "a" / "b" / "c" / "report.txt")
    _torchneck.remove_created(d["created"])
    assert os.listdir(in_tmp) == []


def test_run_and_analyze_refuse_a_folder_alike(tmp_path):
    (tmp_path / "file").write_text("")
    env = dict(os.environ, MARKER=str(tmp_path / "started"))
    ran = run_tool(["-o", "file/sub", script("marker.py")], cwd=str(tmp_path), env=env)
    analysed = subprocess.run([TOOL, "analyze", "-o", "file/sub", TRACE], capture_output=True, text=True,
                              timeout=120, cwd=str(tmp_path))
    assert ran.returncode == analysed.returncode == 2
    assert ran.stderr == analysed.stderr
    assert ran.stderr == f"torchneck: cannot write the report to file/sub: {tmp_path}/file is not a folder\n"
    assert not (tmp_path / "started").exists()


def test_run_and_analyze_name_default_folders_alike(tmp_path):
    # GIVEN a trace and a script with the same stem
    (tmp_path / "job.json").write_bytes(gzip.open(TRACE).read())
    (tmp_path / "job.py").write_text("print('trained')\n")
    assert run_tool(["job.py"], cwd=str(tmp_path)).returncode == 0
    r = subprocess.run([TOOL, "analyze", "job.json"], capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    # THEN two folders, named alike: job-<stamp> and job-<stamp>[-2]
    names = sorted(os.listdir(tmp_path / "torchneck-out"))
    assert len(names) == 2 and all(re.fullmatch(f"job-{STAMP}(-2)?", n) for n in names), names
