"""The output folder and the terminal report's one write to stderr.

The folder is made (or checked) before the script starts, so an unwritable
one is an invocation error (exit 2) and leaves nothing behind. Its path is
kept absolute, so a script that changes directory still gets its report
where the user asked. If writing the report fails once the script has
ended, that is one line on stderr and the script's exit status is kept."""

import errno
import os
import stat
import sys

from torchneck.errors import UsageError
from torchneck.errors import say

# Absolute output folder -> (the path as the user gave it, the working
# directory then, the folders prepare_dir created, outermost first).
_prepared = {}


def _native():
    """The extension (loaded by the runner, after torch); the folder logic
    is in C++ (src/report/output_dir.h), shared with torchneck analyze."""
    from torchneck import _torchneck
    if not hasattr(_torchneck, "prepare_output_dir"):
        raise UsageError("the native part of torchneck is older than its launcher "
                         "(no prepare_output_dir); run `make build` in the torchneck folder")
    return _torchneck


def _remove_created(created):
    """Removes the folders we made, innermost first, if they are empty;
    never one that was there before."""
    if created:
        _native().remove_created(list(created))


def _one_line(text):
    return " ".join(str(text).split())


def prepare_dir(requested, display, shared=False):
    """Creates (or checks) the output folder before the script starts, so an
    unwritable one is an error before any work is done, not after, and locks
    it while this process lives: a folder another torchneck command writes
    into is refused. SHARED: a distributed job's folder, which the launchers
    of its nodes share. DISPLAY (the script, or "-m MODULE") names the
    default folder. Returns its absolute path."""
    target = display[3:] if display.startswith("-m ") else display
    try:
        d = _native().prepare_output_dir(requested or "", target, shared)
    except RuntimeError as e:  # "cannot write the report to DIR: why"
        raise UsageError(str(e)) from None
    _prepared[d["absolute"]] = (d["shown"], os.getcwd(), d["created"])
    return d["absolute"]


def shown(out_dir):
    """OUT_DIR as the user gave it (prepare_dir's), else as it is."""
    return _prepared.get(out_dir, (out_dir,))[0]


def moved(old, new):
    """A prepared folder renamed (a spawned rank's, spawned.py): its report
    is written to NEW, and the folders made for OLD are no longer there to
    remove."""
    _shown, cwd, _created = _prepared.pop(old, (old, None, []))
    _prepared[new] = (new, cwd, [])


def subfolder(out_dir, name):
    """OUT_DIR/NAME made, or found, as a folder of its own: never a symlink
    or a file planted in its place, so what is written into it stays inside
    the output folder. Raises OSError."""
    path = os.path.join(out_dir, name)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise OSError(errno.ENOTDIR, "not a folder (a symlink or a file is in its place)", path) from None
    return path


def discard_dir(out_dir):
    """For a failure after prepare_dir() but before the script starts (the
    native session cannot start): removes the folders prepare_dir made, if
    they are still empty, so a refused invocation leaves nothing behind."""
    _shown, _cwd, created = _prepared.pop(out_dir, (None, None, []))
    _remove_created(created)


# Reports written but not shown yet (report(show_now=False)): out_dir -> text.
held = {}


def show(text):
    """The report on stderr, in one write."""
    try:
        sys.stderr.flush()
        data = ("\n" + text).encode("utf-8", "replace")
        while data:
            data = data[os.write(2, data):]
    except OSError:
        pass


def report(session, facts, out_dir, show_now=True):
    """Collects and writes the files, then prints the report to stderr in one
    write, after the script's own output has been flushed (or, show_now
    False, keeps its text in `held` for a report that follows: run --try's).
    A failure to write is one line on stderr; returns whether the report
    was written."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    shown, launch_cwd, created = _prepared.get(out_dir, (out_dir, None, []))
    try:
        cwd = os.getcwd()
    except OSError:  # the script removed its working directory
        cwd = None
    # The path as the user gave it, unless the script changed directory.
    target = shown if cwd == launch_cwd else out_dir
    error = None
    try:
        text = session.finish(facts, target, launch_cwd or cwd or "")
    except (RuntimeError, OSError) as e:
        text, error = None, e
    if isinstance(text, tuple):  # (report text, write error or None)
        text, error = text
    if text and show_now:
        show(text)
    elif text:
        held[out_dir] = text
    if error:  # last, where the user looks
        say(f"torchneck: {_one_line(error)}")
        _remove_created(created)  # only if nothing could be written into them
    return not error
