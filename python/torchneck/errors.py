"""The errors every command shares, in a module of their own: the modules
the commands use raise them without importing the command line back."""

import sys

from torchneck.os_bytes import shown


class UsageError(Exception):
    """A bad invocation, or a command that cannot start (an unwritable output
    folder, a missing native part): one line on stderr starting with
    "torchneck: ", and exit status EXIT_USAGE. cli.main is the one place that
    turns it into that line and status."""


# The exit status of a UsageError: 2, as argparse and most Unix tools use
# for a bad command line; a profiled script's own status is never changed.
EXIT_USAGE = 2


def say(line):
    """LINE on stderr, now, a path that is not UTF-8 in it shown as \\xff
    (os_bytes.py); never raises (stderr may be closed by the script)."""
    try:
        sys.stderr.write(shown(line) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def one_line(text):
    """TEXT (an exception's message) with its whitespace folded to one line."""
    return " ".join(str(text).split())
