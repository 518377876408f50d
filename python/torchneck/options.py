"""The options of every command, defined once, and the one parser that reads
them: the same spellings everywhere (`--name VALUE` and `--name=VALUE`,
`-o DIR`), repeats that disagree refused, an unknown option one line.

torchneck-analyze (src/tools/analyze_main.cc) reads `analyze`'s options
natively, without starting Python; it follows the same rules and wording,
and tests/python/test_option_agreement.py holds the two to it."""

import os
import re
import shutil
import sys

from torchneck.errors import UsageError

# "an integer": ASCII digits, optionally negative (then refused by the range
# with its own message), nothing else: int() would also take " 5", "+5" and
# "1_000", which the native parser (and a user's eye) would not.
_INTEGER = re.compile(r"-?[0-9]+")

# "a size": ASCII digits, then K, M, G or T (powers of 1024, either case) or
# nothing (bytes), as the native parser reads it.
_SIZE = re.compile(r"([0-9]+)([KMGTkmgt]?)")

# What --python accepts.
PYTHON_MODES = ("sample", "trace", "off")
# What --gpu accepts.
GPU_MODES = ("auto", "on", "off")
# What --detail accepts.
DETAIL_MODES = ("auto", "window", "full")


class Option:
    """One option: its spellings, where its value goes, how it is read."""

    def __init__(self, names, dest, kind, help, metavar="", lo=0, hi=0, default=None, choices=PYTHON_MODES,
                 report=False):
        self.names = names      # ("-o", "--output"): the first long one is canonical
        self.dest = dest        # attribute of the parsed options
        self.kind = kind        # "flag", "int", "seconds" (an int kept as float), "mode", "folder", "setting",
                                # "size" (bytes)
        self.choices = choices  # a "mode"'s values
        # lines of help, without the spelling column; "{default}" is the default
        self.help = [line.format(default=default) for line in help]
        self.metavar = metavar
        self.lo, self.hi = lo, hi
        self.default = default
        # A setting of the reports (ReportSettings, src/pipeline/options.h,
        # by `dest`): every command that writes a report takes it, and the
        # extension gets it in report_settings().
        self.report = report

    @property
    def long(self):
        return [n for n in self.names if n.startswith("--")][0]

    @property
    def shown(self):
        """How a message names it: "-o/--output" for one with two spellings."""
        return "/".join(self.names)

    def spelling(self):
        if self.kind == "flag":
            return ", ".join(self.names)
        return ", ".join(f"{n} {self.metavar}" if not n.startswith("--") else f"{n}={self.metavar}"
                         for n in self.names)


OPTIONS = {o.long: o for o in [
    Option(("--python",), "python_mode", "mode", [
        "Python profile: sample (default: a native sampler of all",
        "threads, ~1% overhead), trace (deterministic, cProfile",
        "statistics, writes python.pstats; slows Python-heavy code",
        "3-4x, like cProfile), or off"], "MODE", default="sample"),
    Option(("--sample-hz",), "sample_hz", "seconds", ["sampling rate for --python=sample (default 200)"],
           "N", 1, 10000, default=200.0),
    Option(("-o", "--output"), "output", "folder", [
        "output folder (default: a new folder under ./torchneck-out/)"], "DIR"),
    Option(("--no-ops",), "ops", "flag", ["do not observe torch operators"], default=True),
    Option(("--detail",), "detail", "mode", [
        "operator detail: auto (default: window; full for a rank",
        "with a GPU window), window (operators, backward nodes,",
        "module calls and collectives only in windows of steady",
        "steps, sized to cost ~2% of the run, held on through a GPU",
        "window; on a rank of a distributed job every 200 steps, the",
        "same steps on every rank; steps, DataLoader waits, backward",
        "passes and the Python samples throughout: far cheaper on",
        "models of many small operators), or full (every operator of",
        "every step) (docs/overhead.md)"],
           "MODE", default="auto", choices=DETAIL_MODES),
    Option(("--timeline-events",), "timeline_events", "int", [
        "operator events kept per thread for the timeline, and",
        "Python samples kept in all (default 524288; the",
        "detail windows stop at 3/4 of it, keeping the rest for",
        "every step's boundaries; aggregates always cover the",
        "whole run)"], "N", 0, 1 << 30, default=1 << 19),
    Option(("--timeline-steps",), "timeline_steps", "int", [
        "keep timelines only for the first N training steps",
        "(optimizer or ProfilerStep boundaries; default 0: no",
        "limit in steps, only --timeline-events)"], "N", 0, 1 << 30, default=0),
    Option(("--top",), "top", "int", ["rows per table in the terminal report (default {default})"], "N", 1, 1000,
           default=15, report=True),
    Option(("--trace-steps",), "trace_steps", "int", [
        "steady steps shown in DIR/trace.json, the timeline for",
        "ui.perfetto.dev or chrome://tracing (default {default}, with",
        "the warm-up steps before them; 0: every step kept)"], "N", 0, 1000000, default=5, report=True),
    Option(("--max-trace-size",), "max_trace_size", "size", [
        "the largest trace read, gunzipped: bytes, or with K,",
        "M, G or T (default: half of this machine's memory, as",
        "the whole text is held while it is read)"], "SIZE", 1, 1 << 50),
    Option(("--spill-interval",), "spill_interval", "seconds", [
        "at most S seconds between periodic spills of the",
        "profile to DIR/profile.spill (default 10; 0: none),",
        "which `torchneck report DIR` turns into the report",
        "after a kill -9 (see docs/endings.md)"], "S", 0, 86400, default=10.0),
    Option(("--memory-interval-ms",), "memory_interval_ms", "int", [
        "sample the resident memory every N ms (default 100; the",
        "samples are thinned as the run grows, so the whole run",
        "stays covered; 0: off)"], "N", 0, 60000, default=100),
    Option(("--gpu",), "gpu", "mode", [
        "GPU collection: auto (default: when CUDA is available, a",
        "Kineto window of steady steps, CPU and CUDA activity),",
        "on (the window even without CUDA: CPU activity only), off"],
           "MODE", default="auto", choices=GPU_MODES),
    Option(("--gpu-steps",), "gpu_steps", "int", [
        "optimizer steps in the GPU window (default 5, fewer when",
        "a step has more than ~1,200 operator events: Kineto",
        "keeps ~2 KB for each until the run's end)"], "N", 1, 1000),
    Option(("--nvml-interval-ms",), "nvml_interval_ms", "int", [
        "sample each GPU's utilisation, memory, SM clock and",
        "power through NVML every N ms (default 100; thinned",
        "as the run grows; nothing without an NVIDIA driver;",
        "0: off)"], "N", 0, 60000, default=100),
    Option(("--no-gc",), "gc", "flag", ["do not time Python's garbage collections (gc.callbacks)"],
           default=True),
    Option(("--try",), "try_setting", "setting", [
        "after the profiled run, measure a setting without editing",
        "the script: it runs again unprofiled, twice with and twice",
        "without it, interleaved, --try-steps steps each: num_workers=N,",
        "prefetch_factor=N, pin_memory=B, persistent_workers=B",
        "(every DataLoader), threads=N, cudnn_benchmark=B, tf32=B,",
        "autocast=bfloat16 (around the model's forward and loss);",
        "auto: the settings the findings suggest (docs/try.md)"], "SETTING"),
    Option(("--try-steps",), "try_steps", "int", [
        "optimizer steps timed in each --try run, after 3 of",
        "warm-up (default 20)"], "N", 5, 100000, default=20),
]}

# The report settings' options, in OPTIONS' order.
REPORT_OPTIONS = [o.long for o in OPTIONS.values() if o.report]


def report_settings(values):
    """VALUES' report settings (a parsed command's options, or anything with
    their `dest` attributes), by name: what the extension's reports take."""
    return {o.dest: getattr(values, o.dest) for o in OPTIONS.values() if o.report}


# The spelling column of the help (wide enough for "-o DIR, --output=DIR").
HELP_COLUMN = 23
HELP_LINE = "  -h, --help           this help"


def options_help(names):
    """The "options:" block of a command's help, generated from OPTIONS so
    that every command shows an option the same way."""
    lines = ["options:"]
    for name in names:
        o = OPTIONS[name]
        first, *rest = o.help
        spelling = "  " + o.spelling()
        pad = " " * (HELP_COLUMN - len(spelling)) if len(spelling) < HELP_COLUMN else "\n" + " " * HELP_COLUMN
        lines.append(spelling + pad + first)
        lines += [" " * HELP_COLUMN + line for line in rest]
    lines.append(HELP_LINE)
    return "\n".join(lines) + "\n"


class HelpRequested(Exception):
    """-h or --help among a command's options: its help, exit status 0."""


class Parsed:
    """A command's options (every one of OPTIONS, at its default unless
    given), its operands, and for `run` the target and the script's own
    arguments."""

    def __init__(self, command):
        self.command = command
        for o in OPTIONS.values():
            setattr(self, o.dest, o.default)
        self.operands = []
        self.module = None  # -m MODULE
        self.script = None
        self.args = []
        self.given = {}  # canonical name -> value as typed
        self.argv = []   # the command's arguments as given (analyze hands them on)


def _value(o, name, value):
    """The value of option O (spelled NAME) as typed -> (stored, compared)."""
    if o.kind in ("int", "seconds"):
        if not _INTEGER.fullmatch(value) or not o.lo <= int(value) <= o.hi:
            raise UsageError(f"{name} must be an integer between {o.lo} and {o.hi}, not '{value}'")
        v = int(value)
        return (float(v) if o.kind == "seconds" else v), v
    if o.kind == "size":
        m = _SIZE.fullmatch(value)
        n = int(m[1]) << (10 * ("KMGT".index(m[2].upper()) + 1) if m[2] else 0) if m else 0
        if not o.lo <= n <= o.hi:
            raise UsageError(f"{name} must be a size between 1 and 1024T such as 512M or 20G (bytes, or K, M, G, "
                             f"T: powers of 1024), not '{value}'")
        return n, n
    if o.kind == "mode":
        if value not in o.choices:
            raise UsageError(f"{name} must be {', '.join(o.choices[:-1])} or {o.choices[-1]}, "
                             f"not '{value}'")
        return value, value
    if o.kind == "setting":
        from torchneck.experiment import canonical, parse_setting
        key, v = parse_setting(value)
        return value, (key if v is None else canonical(key, v))
    # a folder: the same folder however spelled ("out" and "./out/")
    if not value:
        raise UsageError(f"{name} needs a folder name")
    return value, os.path.normpath(os.path.abspath(value))


def parse(spec, argv):
    """Reads ARGV by the command SPEC (cli.Command: its name, options,
    operands, whether its first operand is a script whose arguments follow).
    Raises UsageError (one line) or HelpRequested."""
    p = Parsed(spec.name)
    p.argv = list(argv)
    compared = {}  # canonical name -> the value compared for repeats
    only_operands = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if only_operands or not arg.startswith("-") or arg == "-":
            if spec.script_target:  # `run`: the script; the rest is its own
                p.script, p.args = arg, argv[i:]
                break
            p.operands.append(arg)
            continue
        if arg == "--":
            only_operands = True
            continue
        if arg in ("-h", "--help"):
            raise HelpRequested(spec.name)
        if arg == "-m" and spec.script_target:
            if i >= len(argv):
                raise UsageError("-m needs a module name")
            p.module, p.args = argv[i], argv[i + 1:]
            break
        # --name=VALUE; a short option takes its value as the next argument only
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        o = next((OPTIONS[n] for n in spec.options if name in OPTIONS[n].names), None)
        if o is None:
            raise UsageError(f"unknown option {arg} (see torchneck {spec.name} --help)")
        if o.kind == "flag":
            if eq:
                raise UsageError(f"{name} takes no value")
            stored, key = not o.default, True
        else:
            if not eq:
                if i >= len(argv):
                    raise UsageError(f"{name} needs a value")
                value = argv[i]
                i += 1
            stored, key = _value(o, name, value)
        if o.long in compared and compared[o.long] != key:
            raise UsageError(f"{o.shown} given twice, as {p.given[o.long]} and {value}; give it once")
        compared[o.long] = key
        p.given[o.long] = value
        setattr(p, o.dest, stored)
    if spec.script_target:
        if p.script is None and p.module is None:
            raise UsageError(f"no script given (usage: {spec.usage[0]})")
        _after_interpreter(p)
        _check_run_conflicts(p)
    elif not p.operands:
        raise UsageError(f"{spec.name} needs {spec.operand} (usage: {spec.usage[0]})")
    elif len(p.operands) > 1:
        raise UsageError(f"{spec.name} takes one {spec.operand.split(' ', 1)[1]}, not also '{p.operands[1]}'")
    return p


# `python3`, `python3.13`, `python`: a name an interpreter goes by.
_INTERPRETER_NAME = re.compile(r"python[0-9]*(\.[0-9]+)?")


def _interpreter(name):
    """NAME's executable when NAME is a Python interpreter: named python*,
    as typed or found on PATH, and a binary or a launcher in another
    language (pyenv's shims are bash). A script called `python` (Python
    source, or a `#!... python` line) stays the script."""
    if not _INTERPRETER_NAME.fullmatch(os.path.basename(name)):
        return None
    path = name if os.sep in name or os.path.exists(name) else shutil.which(name)
    try:
        with open(path, "rb") as f:
            head = f.readline(256)
    except (OSError, TypeError):
        return None
    if head.startswith(b"\x7fELF") or (head.startswith(b"#!") and b"python" not in head):
        return path
    return None


def _same_python(exe):
    """Whether EXE runs this Python: the same version and the same prefix
    (a virtual environment's python resolves to its base's binary, but
    imports from its own site-packages; a shim resolves to nothing). Asks
    EXE itself, once, before anything starts."""
    import subprocess
    try:
        r = subprocess.run([exe, "-c", "import sys; print(sys.prefix); print(sys.version)"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and r.stdout.splitlines() == [sys.prefix, *sys.version.splitlines()]


def _after_interpreter(p):
    """`torchneck run python train.py ...`, as one types `nsys profile python
    train.py`: the interpreter named first is this one, so the script is
    the next word (or -m MODULE). Another interpreter cannot be profiled
    from here (the native session is built for this one): one line saying
    how."""
    if p.script is None:
        return
    exe = _interpreter(p.script)
    if exe is None:
        return
    if not _same_python(exe):
        raise UsageError(f"{p.script} is another Python than the one torchneck runs in ({sys.executable}); "
                         f"give the script alone (torchneck run train.py), or install torchneck in that "
                         f"Python and run `{p.script} -m torchneck run train.py`")
    args = p.args
    if not args:
        raise UsageError(f"{p.script} is the Python interpreter, not a script: give the script "
                         f"(torchneck run train.py)")
    if args[0] == "-m":
        if len(args) < 2:
            raise UsageError("-m needs a module name")
        p.script, p.module, p.args = None, args[1], args[2:]
    elif args[0].startswith("-") and args[0] != "-":
        raise UsageError(f"{p.script}'s own option {args[0]} is not passed on: give the script "
                         f"(torchneck run [options] train.py) or -m MODULE after {p.script}")
    else:
        p.script, p.args = args[0], args[1:]


def _check_run_conflicts(p):
    """Combinations where one option would be silently ignored."""
    if "--sample-hz" in p.given and p.python_mode != "sample":
        raise UsageError(f"--sample-hz conflicts with --python={p.python_mode}: only --python=sample samples")
    for name in ("--detail", "--timeline-events", "--timeline-steps"):
        if name in p.given and not p.ops:
            raise UsageError(f"{name} conflicts with --no-ops (no operator events are kept)")
    if "--try-steps" in p.given and p.try_setting is None:
        raise UsageError("--try-steps needs --try (it sizes the --try runs)")
