"""Python's record_function while a session runs
(src/collect/python/record_function_scopes.h,
python/torchneck/record_function_wrap.py): its __enter__ and __exit__ are
replaced so that the scopes are recorded without a RecordFunction callback.

GIVEN a native session with the operator observer, in this process
WHEN  the script uses record_function: as a context manager, around code
      that raises, as a decorator, inside a TorchScript function
THEN  each behaves as torch's own (TorchScript compiles the class from the
      replaced methods' source), and after the session the class has
      torch's own methods again.

Run with: /usr/bin/python3 -m pytest tests/python/test_record_function_scopes.py
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
from torch.autograd.profiler import record_function  # noqa: E402

from torchneck import _torchneck  # noqa: E402


@pytest.fixture
def session():
    own = (record_function.__enter__, record_function.__exit__)
    s = _torchneck.Session(python_mode="off", ops=True, modules=False, memory_interval_ms=0, gc=False,
                           nvml_interval_ms=0)
    s.start()
    try:
        yield own
    finally:
        s.stop()
    # torch's own methods are back
    assert (record_function.__enter__, record_function.__exit__) == own


def test_the_class_is_wrapped_during_the_session_and_behaves_as_torchs(session):
    assert (record_function.__enter__, record_function.__exit__) != session
    with record_function("a") as r:
        y = torch.ones(3) * 2
    assert isinstance(r, record_function) and y.sum().item() == 6.0
    with pytest.raises(ZeroDivisionError):
        with record_function("raises"):
            1 / 0
    # an exception the scope's __exit__ sees is not swallowed, and the next scope works
    with record_function("after"):
        pass

    @record_function("decorated")
    def f(x):
        return x + 1
    assert f(torch.zeros(1)).item() == 1.0


def test_torchscript_compiles_record_function_during_the_session(session):
    # A C method in the class's place made TorchScript refuse the class
    # ("Cannot instantiate class 'record_function' in a script function").
    @torch.jit.script
    def scripted(x: torch.Tensor) -> torch.Tensor:
        with record_function("scripted"):
            y = x * 3
        return y
    assert scripted(torch.ones(2)).tolist() == [3.0, 3.0]
