"""`torchneck report DIR`: the full report again from DIR/profile.spill,
which every run leaves behind (the final one after a normal ending, the last
periodic one after a kill -9, the crash-time one after a fatal signal).
Rewrites DIR/profile.json and DIR/report.txt and prints the report. A
distributed job's folder (rank-K folders, this_rank.py) has its ranks merged
again. Its options are read by cli.py (options.py)."""

import os
import sys

from torchneck.errors import UsageError
from torchneck.options import report_settings


def _has_rank_folders(out_dir):
    """A distributed job's folder: rank-K folders (this_rank.py)."""
    try:
        return any(n.startswith("rank-") and n[5:].isdigit() and os.path.isdir(os.path.join(out_dir, n))
                   for n in os.listdir(out_dir))
    except OSError:
        return False


def _merge_ranks(out_dir, p):
    """The ranks' reports merged again (several nodes writing into one
    shared folder, or after a crash): a rank missing, from another job, or
    with another world size is one line and exit 2."""
    try:
        import torch  # noqa: F401
        from torchneck import _torchneck
    except ImportError as e:
        raise UsageError(f"cannot load the native part ({e}); run `make build`") from None
    try:
        text = _torchneck.report_ranks(os.fsencode(out_dir), os.getcwdb(), report_settings(p), strict=True)
    except RuntimeError as e:
        raise UsageError(" ".join(str(e).split())) from None
    sys.stdout.write(text)
    return 0


def run(p):
    out_dir = p.operands[0]
    if not os.path.isdir(out_dir):
        raise UsageError(f"cannot read {out_dir}: not a folder")
    spill = os.path.join(out_dir, "profile.spill")
    if not os.path.exists(spill) and _has_rank_folders(out_dir):
        return _merge_ranks(out_dir, p)
    if not os.path.exists(spill):
        raise UsageError(f"{out_dir} has no profile.spill: not a torchneck output folder, "
                         "or its run was killed before its first spill (1 s in)")
    try:
        import torch  # noqa: F401  (the extension links the libtorch torch loads)
        from torchneck import _torchneck
    except ImportError as e:
        raise UsageError(f"cannot load the native part ({e}); run `make build`") from None
    # The paths as bytes: a folder whose name is not UTF-8 is read all the same
    # (as a str it could not be passed). Every failure is a RuntimeError with
    # a message (src/bindings/report_for_python.h).
    try:
        text = _torchneck.report_from_spill(os.fsencode(out_dir), os.getcwdb(), report_settings(p))
    except RuntimeError as e:
        raise UsageError(str(e)) from None
    sys.stdout.write(text)
    return 0
