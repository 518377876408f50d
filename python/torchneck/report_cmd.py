"""`torchneck report DIR`: the full report again from DIR/profile.spill,
which every run leaves behind (the final one after a normal ending, the last
periodic one after a kill -9, the crash-time one after a fatal signal).
Rewrites DIR/profile.json and DIR/report.txt and prints the report. Its
options are read by cli.py (options.py)."""

import os
import sys

from torchneck.errors import UsageError


def run(p):
    out_dir = p.operands[0]
    if not os.path.isdir(out_dir):
        raise UsageError(f"cannot read {out_dir}: not a folder")
    spill = os.path.join(out_dir, "profile.spill")
    if not os.path.exists(spill):
        raise UsageError(f"{out_dir} has no profile.spill: not a torchneck output folder, "
                         "or its run was killed before its first spill (1 s in)")
    try:
        import torch  # noqa: F401  (the extension links the libtorch torch loads)
        from torchneck import _torchneck
    except ImportError as e:
        raise UsageError(f"cannot load the native part ({e}); run `make build`") from None
    try:
        text = _torchneck.report_from_spill(out_dir, os.getcwd(), p.top, p.trace_steps)
    except RuntimeError as e:
        raise UsageError(str(e)) from None
    sys.stdout.write(text)
    return 0
