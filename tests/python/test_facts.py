"""The facts Python hands to the native session (python/torchneck/facts.py,
src/bindings/facts.h): typed structs, not dicts.

GIVEN the builders, one per struct
WHEN  a field is left out, misspelled, of the wrong type, or an enum name
      does not exist
THEN  it is an error at once; and the facts given reach profile.json as given.

Run with: /usr/bin/python3 -m pytest tests/python/test_facts.py
"""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402,F401 - the extension links the libtorch torch loads

from torchneck import _torchneck  # noqa: E402
from torchneck import facts  # noqa: E402

RUN = dict(script="train.py", argv=["train.py", "--epochs", 3], exit_code=3, ending="sys_exit",
           start_unix_s=1.7e9, wall_s=2.5, main_thread_cpu_s=1.25, main_thread_runqueue_s=-1.0,
           process_cpu_s=1.5, machine_cpu_s=4.0, machine_steal_s=0.0)
LOADER = dict(num_workers=2, batch_size=None, pin_memory=True, persistent_workers=False, prefetch_factor=4,
              dataset_type="TensorDataset", created_at="train.py:12")
PROCESS = dict(pid=1234, role="main", worker_id=-1, start_method="", wall_s=2.5, start_ns=5_000_000, busy_s=1.25, cpu_s=2.0,
               batches=0, batch_ns_max=0)


def env(**dataloader):
    return facts.env_facts(python="3.11.2", torch="1.13.0", cpu_cores=8, torch_threads=4, cuda=False,
                           dataloaders=[facts.dataloader_facts(**{**LOADER, **dataloader})],
                           optimizers=[facts.optimizer_facts(type="SGD", param_tensors=6, foreach=True)])


def test_a_missing_field_is_an_error_at_once():
    run = dict(RUN)
    del run["wall_s"]
    with pytest.raises(TypeError, match="wall_s"):
        facts.run_info(**run)
    process = dict(PROCESS)
    del process["role"]
    with pytest.raises(TypeError, match="role"):
        facts.process_info(**process)


def test_a_misspelled_field_is_an_error_at_once():
    with pytest.raises(TypeError, match="wal_s"):
        facts.run_info(**RUN, wal_s=1.0)
    info = facts.run_info(**RUN)
    with pytest.raises(AttributeError):
        info.wal_s = 1.0  # the structs take no attribute they do not have
    with pytest.raises(AttributeError):
        _torchneck.EnvFacts().dataloader = []


def test_a_wrong_type_or_unknown_enum_name_is_an_error_at_once():
    with pytest.raises(TypeError):
        facts.run_info(**{**RUN, "exit_code": "3"})
    with pytest.raises(AttributeError, match="sys_exitt"):
        facts.run_info(**{**RUN, "ending": "sys_exitt"})
    with pytest.raises(AttributeError, match="worker"):
        facts.process_info(**{**PROCESS, "role": "worker"})
    info = facts.run_info(**RUN)
    with pytest.raises(ValueError, match="crash handler"):
        info.ending = _torchneck.Ending.fatal_signal  # only the crash handler knows which signal


def test_an_unknown_python_mode_is_refused_by_name():
    with pytest.raises(ValueError, match='"sampel"'):
        _torchneck.Session(python_mode="sampel")


def test_the_facts_given_reach_profile_json(tmp_path):
    # GIVEN a session that collects nothing, and facts with known values
    session = _torchneck.Session(python_mode="off", ops=False, modules=False)
    session.start()
    run_facts = facts.run_facts(run=facts.run_info(**RUN), env=env(), notes=["a note from Python"],
                                thread_names={}, main_tid=0, process=facts.process_info(**PROCESS),
                                growing_graphs=[])
    # WHEN it finishes into a folder
    text, error = session.finish(run_facts, str(tmp_path), str(tmp_path))
    assert error is None, error
    # THEN profile.json says what the facts said
    with open(tmp_path / "profile.json") as f:
        profile = json.load(f)
    run = profile["run"]
    assert (run["script"], run["argv"], run["exit_code"], run["ending"], run["wall_s"], run["python_mode"]) == \
        ("train.py", ["train.py", "--epochs", "3"], 3, "sys.exit", 2.5, "off")
    assert run["main_thread_cpu_s"] == 1.25 and run["main_thread_runqueue_s"] is None
    e = profile["env"]
    assert (e["python"], e["torch"], e["cpu_cores"], e["torch_threads"], e["cuda"]) == ("3.11.2", "1.13.0", 8, 4, False)
    assert e["dataloaders"] == [{"num_workers": 2, "batch_size": None, "pin_memory": True,
                                 "persistent_workers": False, "prefetch_factor": 4, "dataset": "TensorDataset",
                                 "created_at": "train.py:12"}]
    assert e["optimizers"] == [{"type": "SGD", "param_tensors": 6, "foreach": True}]
    assert "a note from Python" in json.dumps(profile)
    assert "sys.exit" in text  # the terminal report's first line names the ending
