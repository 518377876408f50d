"""The command line: `torchneck COMMAND ...` for every command, one table of
commands, one help, and the one place where an error becomes its line on
stderr and its exit status.

A command is one entry of COMMANDS: its name, a one-line summary for
`torchneck help`, its usage, the options it takes (defined once, in
options.py), what it expects after them, and the function that does it.

`python -m torchneck SCRIPT [ARGS...]` stays the drop-in for
`python -m torch.utils.bottleneck SCRIPT [ARGS...]`: a first word that is
not a command (nor -h, --help, --version) starts `run`'s options or names
its script. A first word that is a command always means the command, even
when a file of that name is in the working directory: what a command line
does should not depend on the files around it. Such a script runs as
`torchneck run analyze` (or `./analyze`, or `python -m torchneck -- analyze`)."""

import sys

from torchneck.errors import EXIT_USAGE, UsageError
from torchneck.options import REPORT_OPTIONS, HelpRequested, options_help, parse
from torchneck.os_bytes import shown

PROG = "torchneck"


class Command:
    def __init__(self, name, summary, usage, options, about, handler, operand=None, script_target=False):
        self.name = name
        self.summary = summary    # one line in `torchneck help`
        self.usage = usage        # usage lines; the first one is quoted in errors
        self.options = options    # canonical names in options.OPTIONS
        self.about = about        # the help's text between usage and options
        self.handler = handler    # (Parsed) -> exit status
        self.operand = operand    # "a trace file or folder": exactly one, anywhere among the options
        self.script_target = script_target  # the first operand is a script; what follows is its own

    def help(self):
        usage = "usage: " + "\n       ".join(self.usage)
        return f"{usage}\n\n{self.about}\n{options_help(self.options)}"


def _run(p):
    from torchneck import runner
    return runner.run(p)


def _report(p):
    from torchneck import report_cmd
    return report_cmd.run(p)


def _analyze(p):
    from torchneck import analyze_cmd
    return analyze_cmd.run(p)


# `diff` is native (src/tools/diff_main.cc, which has its own help and
# parser): its arguments go to it unread.
DIFF_NATIVE = "torchneck-diff"


def _diff(argv):
    from torchneck import analyze_cmd
    return analyze_cmd.exec_native(argv, DIFF_NATIVE)


TORCHRUN_HELP = """\
usage: torchneck torchrun [run options] [torchrun options] SCRIPT [ARGS...]

Runs torch's own launcher (torch.distributed.run) with every rank under the
profiler: each rank writes DIR/rank-K/, and when torchrun returns the ranks
are compared and the merged report is written to DIR (profile.json with
ranks[] and collectives, report.txt, report.html) and shown. Exit status:
torchrun's own.

run's options (-o DIR, --python, --top, ...; not --try) come first;
everything from the first torchrun option on is torchrun's, e.g.
  torchneck torchrun -o out --nproc_per_node=2 train.py --epochs 1
Where this torch's launcher needs a work-around to start (torch 1.13 on
Python 3.11; torch 2.x built without libuv), it is applied and said in one
line. Keeping your own launch line works too: torchrun ... -m torchneck run
-o DIR train.py; then rank 0 merges the ranks when they have ended, and
`torchneck report DIR` merges again (docs/distributed.md).

On a node that does not host the rendezvous (another node's --rdzv_endpoint,
or --master_addr with --node_rank above 0), the rendezvous store is asked
first; one that never answers is one line and exit status 2 after
TORCHNECK_RDZV_WAIT_S seconds (by default as long as torch would wait).
"""


def _torchrun(argv):
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(TORCHRUN_HELP)
        return 0
    from torchneck import torchrun_cmd
    return torchrun_cmd.run(argv, COMMANDS["run"].options)


RUN_ABOUT = """\
Runs SCRIPT once, unchanged, as __main__ with its own sys.argv, and reports
where the time went: Python functions, torch operators, backward nodes.
The report goes to stderr after the script has finished (the script's stdout
stays clean); it is also saved as DIR/report.txt, with DIR/profile.json.

Options come before SCRIPT (or -m MODULE); everything after it is the
script's own. An option may be repeated with the same value; given twice
with different values, it is an error, as are combinations where one option
would be silently ignored: --sample-hz with --python=trace or off, and
--detail, --timeline-events or --timeline-steps with --no-ops.

`torchneck run python train.py` is `torchneck run train.py` when that
python is the one torchneck runs in (`python -m MODULE` too); another
interpreter (a virtual environment's, a pyenv shim's) is refused with how
to profile under it: install torchneck there.

A script that starts its ranks with torch.multiprocessing.spawn has each
rank profiled into DIR/rank-K and the ranks merged into DIR when spawn
returns; the launching process's own report is then in DIR/launcher
(docs/distributed.md).

Exit status: the script's own. A bad invocation (unknown or conflicting
option, missing script, a directory given as the script, a syntax error, an
output folder that cannot be written) is one line on stderr starting with
"torchneck: " and exit status 2, before the script starts, and leaves no
output folder behind. If the report cannot be written once the script has
ended (a full disk), that is one such line too, but the exit status stays
the script's own: a training run that finished is not reported as failed.
"""

REPORT_ABOUT = """\
Rebuilds the report of a run from DIR/profile.spill: after a kill -9, an
out-of-memory kill or a fatal signal, or to read a report again. Rewrites
DIR/profile.json, DIR/report.txt and DIR/trace.json.
"""

# The same words as kUsage in src/tools/analyze_main.cc, which prints this
# help (`torchneck analyze` does not start Python); test_option_agreement.py
# compares the two.
ANALYZE_ABOUT = """\
Reports the bottleneck of a torch.profiler (Kineto) trace: TRACE is a .json
or .json.gz file (export_chrome_trace, tensorboard_trace_handler), or a
folder of them, one per rank. Prints the report and writes DIR/profile.json,
DIR/report.txt and DIR/trace.json, a timeline of the first steps for
https://ui.perfetto.dev or chrome://tracing.
"""

_RUN_OPTIONS = ["--python", "--sample-hz", "--output", "--no-ops", "--detail", "--timeline-events", "--timeline-steps",
                *REPORT_OPTIONS, "--spill-interval", "--memory-interval-ms", "--gpu", "--gpu-steps",
                "--nvml-interval-ms", "--no-gc", "--try", "--try-steps"]

COMMANDS = {c.name: c for c in [
    Command("run", "profile a script: run it once, unchanged, and report where the time went",
            ["torchneck run [options] SCRIPT [ARGS...]", "torchneck run [options] -m MODULE [ARGS...]"],
            _RUN_OPTIONS, RUN_ABOUT, _run, script_target=True),
    Command("analyze", "the report of a torch.profiler (Kineto) trace, or of a folder of rank traces",
            ["torchneck analyze [options] TRACE"], ["--output", *REPORT_OPTIONS, "--max-trace-size"], ANALYZE_ABOUT,
            _analyze, operand="a trace file or folder"),
    Command("report", "the report of a run again, from its output folder (after a kill -9, too)",
            ["torchneck report [options] DIR"], REPORT_OPTIONS, REPORT_ABOUT, _report,
            operand="an output folder"),
    Command("diff", "what changed between two runs: step time with its interval, movers, findings resolved",
            ["torchneck diff [options] BEFORE AFTER"], [], "", None),
    Command("torchrun", "a distributed job under torch's launcher, every rank profiled, one cross-rank report",
            ["torchneck torchrun [run options] [torchrun options] SCRIPT [ARGS...]"], [], "", None),
    Command("help", "this list, or a command's own help: torchneck help COMMAND",
            ["torchneck help [COMMAND]"], [], "", None),
]}


def overview():
    """`torchneck --help` and `torchneck help`: every command, one line each."""
    width = max(len(name) for name in COMMANDS) + 2
    rows = "\n".join(f"  {name.ljust(width)}{c.summary}" for name, c in COMMANDS.items())
    return f"""\
usage: torchneck COMMAND [options] ...
       python -m torchneck [run options] SCRIPT [ARGS...]   (drop-in for python -m torch.utils.bottleneck)

commands:
{rows}

`torchneck COMMAND --help` lists the command's options. An option that takes
a value takes it as `--name VALUE` or `--name=VALUE` (`-o DIR` for -o), the
same in every command; given twice, it must say the same both times.

A first word that is not a command is `run`'s: `python -m torchneck train.py`
is `torchneck run train.py`. A command word always means the command, even
when a file of that name exists here: run such a script as `torchneck run run`
or `./run`.

Exit status: the command's (for run, the script's own); a bad invocation is
one line on stderr starting with "torchneck: " and exit status 2.
"""


def _help(argv):
    if not argv:
        sys.stdout.write(overview())
        return 0
    if len(argv) > 1 or argv[0] not in COMMANDS:
        raise UsageError(f"help takes one command ({', '.join(COMMANDS)}), not {' '.join(argv)}")
    return _show_help(argv[0])


def _show_help(name):
    if name == "analyze":  # its help is the native binary's own, as `./torchneck analyze --help` gives it
        from torchneck import analyze_cmd
        return analyze_cmd.exec_native(["--help"])
    if name == "diff":
        return _diff(["--help"])
    if name == "torchrun":
        return _torchrun(["--help"])
    if name == "help":
        sys.stdout.write(overview())
        return 0
    sys.stdout.write(COMMANDS[name].help())
    return 0


def dispatch(argv):
    """ARGV (after the program name) -> exit status; raises UsageError."""
    if not argv:
        raise UsageError("no command or script given (see torchneck --help)")
    first = argv[0]
    if first in ("-h", "--help"):
        return _help([])
    if first == "--version":
        from torchneck import __version__
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    if first == "help":
        return _help(argv[1:])
    if first == "diff":
        return _diff(argv[1:])
    if first == "torchrun":
        return _torchrun(argv[1:])
    if first in COMMANDS:
        name, rest = first, argv[1:]
    else:  # the drop-in: `python -m torchneck [options] SCRIPT [ARGS...]`
        name, rest = "run", argv
    command = COMMANDS[name]
    try:
        parsed = parse(command, rest)
    except HelpRequested:
        return _show_help(name)
    return command.handler(parsed)


def main(argv):
    """The one place that maps errors to exit statuses."""
    try:
        return dispatch(argv)
    except UsageError as e:
        message = shown(" ".join(str(e).split()))  # one line, whatever the cause's text; bytes as \xff
        try:
            sys.stderr.write(f"{PROG}: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return EXIT_USAGE
