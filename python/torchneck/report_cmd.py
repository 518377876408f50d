"""`torchneck report DIR`: the full report again from DIR/profile.spill,
which every run leaves behind (the final one after a normal ending, the last
periodic one after a kill -9, the crash-time one after a fatal signal).
Rewrites DIR/profile.json and DIR/report.txt and prints the report."""

import os
import sys

USAGE = """\
usage: torchneck report [--top=N] [--trace-steps=N] DIR

Rebuilds the report of a run from DIR/profile.spill: after a kill -9, an
out-of-memory kill or a fatal signal, or to read a report again. Rewrites
DIR/profile.json, DIR/report.txt and DIR/trace.json.
"""


def main(argv):
    top = 15
    trace_steps = 5
    dirs = []
    for arg in argv:
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if arg.startswith("--top="):
            try:
                top = int(arg.split("=", 1)[1])
            except ValueError:
                top = 0
            if not 1 <= top <= 1000:
                sys.stderr.write(f"torchneck: --top must be an integer between 1 and 1000, not {arg.split('=', 1)[1]!r}\n")
                return 2
        elif arg.startswith("--trace-steps="):
            value = arg.split("=", 1)[1]
            try:
                trace_steps = int(value)
            except ValueError:
                trace_steps = -1
            if not 0 <= trace_steps <= 1000000:
                sys.stderr.write(f"torchneck: --trace-steps must be an integer between 0 and 1000000, not {value!r}\n")
                return 2
        elif arg.startswith("-") and arg != "-":
            sys.stderr.write(f"torchneck: unknown option {arg} for report (see torchneck report --help)\n")
            return 2
        else:
            dirs.append(arg)
    if len(dirs) != 1:
        sys.stderr.write("torchneck: report needs exactly one output folder (usage: torchneck report DIR)\n")
        return 2
    out_dir = dirs[0]
    if not os.path.isdir(out_dir):
        sys.stderr.write(f"torchneck: cannot read {out_dir}: not a folder\n")
        return 2
    spill = os.path.join(out_dir, "profile.spill")
    if not os.path.exists(spill):
        sys.stderr.write(f"torchneck: {out_dir} has no profile.spill: not a torchneck output folder, "
                         "or its run was killed before its first spill (1 s in)\n")
        return 2
    try:
        import torch  # noqa: F401  (the extension links the libtorch torch loads)
        from torchneck import _torchneck
    except ImportError as e:
        sys.stderr.write(f"torchneck: cannot load the native part ({e}); run `make build`\n")
        return 2
    try:
        text = _torchneck.report_from_spill(out_dir, os.getcwd(), top, trace_steps)
    except RuntimeError as e:
        sys.stderr.write(f"torchneck: {e}\n")
        return 2
    sys.stdout.write(text)
    return 0
