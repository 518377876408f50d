"""Command line: parse options up to the target, leave the script's own
arguments untouched, and turn every bad invocation into one line on stderr
and exit status 2."""

import os
import sys

USAGE = """\
usage: torchneck run [options] SCRIPT [ARGS...]
       torchneck run [options] -m MODULE [ARGS...]
       torchneck report [--top=N] DIR                   (the report again, from DIR/profile.spill)
       python -m torchneck [options] SCRIPT [ARGS...]   (drop-in for python -m torch.utils.bottleneck)

Runs SCRIPT once, unchanged, as __main__ with its own sys.argv, and reports
where the time went: Python functions, torch operators, backward nodes.

options:
  --python=MODE        Python profile: sample (default: a native sampler of all
                       threads, ~1% overhead), trace (deterministic, cProfile
                       statistics, writes python.pstats; slows Python-heavy code
                       3-4x, like cProfile), or off
  --sample-hz=N        sampling rate for --python=sample (default 200)
  -o DIR, --output=DIR output folder (default: a new folder under ./torchneck-out/)
  --no-ops             do not observe torch operators
  --timeline-events=N  operator events kept per thread for the timeline, and
                       Python samples kept in all (default 524288;
                       aggregates always cover the whole run)
  --timeline-steps=N   keep timelines only for the first N training steps
                       (optimizer or ProfilerStep boundaries; default 0: no
                       limit in steps, only --timeline-events)
  --trace-steps=N      steady steps shown in DIR/trace.json, the timeline for
                       ui.perfetto.dev or chrome://tracing (default 5, with
                       the warm-up steps before them; 0: every step kept)
  --spill-interval=S   at most S seconds between periodic spills of the
                       profile to DIR/profile.spill (default 10; 0: none),
                       which `torchneck report DIR` turns into the report
                       after a kill -9 (see docs/endings.md)
  --top=N              rows per table in the terminal report (default 15)
  -h, --help           this help
  --version            print the version

The report goes to stderr after the script has finished (the script's stdout
stays clean); it is also saved as DIR/report.txt, with DIR/profile.json.

Options come before SCRIPT (or -m MODULE); everything after it is the
script's own. An option may be repeated with the same value; given twice
with different values, it is an error, as are combinations where one option
would be silently ignored: --sample-hz with --python=trace or off, and
--timeline-events or --timeline-steps with --no-ops.

Exit status: the script's own. A bad invocation (unknown or conflicting
option, missing script, a directory given as the script, a syntax error, an
output folder that cannot be written) is one line on stderr starting with
"torchneck: " and exit status 2, before the script starts, and leaves no
output folder behind. If the report cannot be written once the script has
ended (a full disk), that is one such line too, but the exit status stays
the script's own: a training run that finished is not reported as failed.
"""


class UsageError(Exception):
    """A bad invocation: reported as one line, exit status 2."""


class Options:
    def __init__(self):
        self.python_mode = "sample"
        self.sample_hz = 200.0
        self.output = None
        self.ops = True
        self.timeline_events = 1 << 19
        self.timeline_steps = 0
        self.trace_steps = 5
        self.spill_interval = 10.0
        self.top = 15
        self.module = None  # -m MODULE
        self.script = None
        self.args = []


def _int(name, text, lo, hi):
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"{name} needs an integer, not {text!r}") from None
    if not lo <= v <= hi:
        raise UsageError(f"{name} must be between {lo} and {hi}, not {v}")
    return v


# Options that take a value; -o and --output are one option.
_TAKES_VALUE = {"--python": "--python", "--sample-hz": "--sample-hz", "-o": "--output",
                "--output": "--output", "--timeline-events": "--timeline-events", "--top": "--top",
                "--timeline-steps": "--timeline-steps", "--spill-interval": "--spill-interval",
                "--trace-steps": "--trace-steps"}


def parse(argv):
    """Options first; the first non-option (or -m MODULE) is the target and
    everything after it belongs to the script."""
    o = Options()
    given = {}  # option -> (value as typed, parsed value): repeats must agree
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg == "-m":
            if i + 1 >= len(argv):
                raise UsageError("-m needs a module name")
            o.module = argv[i + 1]
            o.args = argv[i + 2:]
            _check_conflicts(o, given)
            return o
        if arg in ("-h", "--help"):
            raise SystemExit(_print_usage())
        if arg == "--version":
            from torchneck import __version__
            print(f"torchneck {__version__}")
            raise SystemExit(0)
        name, eq, value = arg.partition("=")
        if name not in _TAKES_VALUE and name != "--no-ops":
            raise UsageError(f"unknown option {arg} (see torchneck --help)")
        if name == "--no-ops":
            if eq:
                raise UsageError("--no-ops takes no value")
            o.ops = False
            given["--no-ops"] = ("", True)
            i += 1
            continue
        if not eq:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value")
            value = argv[i + 1]
            i += 1
        i += 1
        _set(o, given, name, value)
    if i >= len(argv):
        raise UsageError("no script given (usage: torchneck run [options] SCRIPT [ARGS...])")
    o.script = argv[i]
    o.args = argv[i + 1:]
    _check_conflicts(o, given)
    return o


def _set(o, given, name, value):
    """Parses one option's value into o; a repeat must say the same."""
    if name == "--python":
        if value not in ("sample", "trace", "off"):
            raise UsageError(f"--python must be sample, trace or off, not {value!r}")
        o.python_mode = parsed = value
    elif name == "--sample-hz":
        o.sample_hz = parsed = float(_int(name, value, 1, 10000))
    elif name in ("-o", "--output"):
        if not value:
            raise UsageError(f"{name} needs a folder name")
        o.output = value
        parsed = os.path.normpath(os.path.abspath(value))
    elif name == "--timeline-events":
        o.timeline_events = parsed = _int(name, value, 0, 1 << 30)
    elif name == "--timeline-steps":
        o.timeline_steps = parsed = _int(name, value, 0, 1 << 30)
    elif name == "--trace-steps":
        o.trace_steps = parsed = _int(name, value, 0, 1000000)
    elif name == "--spill-interval":
        o.spill_interval = parsed = float(_int(name, value, 0, 86400))
    else:  # --top
        o.top = parsed = _int(name, value, 1, 1000)
    key = _TAKES_VALUE[name]
    if key in given and given[key][1] != parsed:
        shown = "-o/--output" if key == "--output" else key
        raise UsageError(f"{shown} given twice, as {given[key][0]} and {value}; give it once")
    given[key] = (value, parsed)


def _check_conflicts(o, given):
    """Combinations where one option would be silently ignored."""
    if "--sample-hz" in given and o.python_mode != "sample":
        raise UsageError(f"--sample-hz conflicts with --python={o.python_mode}: only --python=sample samples")
    for name in ("--timeline-events", "--timeline-steps"):
        if name in given and not o.ops:
            raise UsageError(f"{name} conflicts with --no-ops (no operator events are kept)")


def _print_usage():
    sys.stdout.write(USAGE)
    return 0


def main(argv):
    if argv and argv[0] == "run" and not os.path.isfile("run"):
        argv = argv[1:]
    elif argv and argv[0] in ("-h", "--help"):
        return _print_usage()
    try:
        options = parse(argv)
        from torchneck import runner
        return runner.run(options)
    except UsageError as e:
        sys.stderr.write(f"torchneck: {e}\n")
        return 2
