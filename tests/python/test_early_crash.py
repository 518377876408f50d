"""A script that crashes at once, while the spill thread is only starting,
still gets its crash report (src/bindings/spiller.cc waits for that thread
to have let the GIL go before the script runs).

GIVEN scripts/endings.py segv: a SIGSEGV in C a few milliseconds in, while
      holding the GIL
WHEN  it runs under torchneck several times (before the fix about half the
      runs lost the report: the spill thread was still waiting for the GIL)
THEN  every run dies by SIGSEGV, as under plain Python, and leaves
      profile.json saying so.

Run with: /usr/bin/python3 -m pytest tests/python/test_early_crash.py
"""

import os

from conftest import load_profile, run_plain, run_tool, script

# Each lost report was a coin flip or so; five runs miss the bug about 1 in 30.
RUNS = 5


def test_an_immediate_crash_always_gets_its_report(tmp_path):
    plain = run_plain([script("endings.py"), "segv"])
    for i in range(RUNS):
        out = str(tmp_path / f"out{i}")
        r = run_tool(["-o", out, script("endings.py"), "segv"], timeout=120)
        assert r.returncode == plain.returncode, (i, r.stderr)
        assert os.path.exists(os.path.join(out, "profile.json")), (i, r.stderr)
        assert load_profile(out)["run"]["ending"] == "fatal signal SIGSEGV"
