"""The output folder and the terminal report's one write to stderr.

The folder is made (or checked) before the script starts, so an unwritable
one is an invocation error (exit 2) and leaves nothing behind. Its path is
kept absolute, so a script that changes directory still gets its report
where the user asked. If writing the report fails once the script has
ended, that is one line on stderr and the script's exit status is kept."""

import datetime
import os
import sys

from torchneck.cli import UsageError

# Absolute output folder -> (the path as the user gave it, the working
# directory then, the folders prepare_dir created, outermost first).
_prepared = {}


def _default_dir(display):
    stem = os.path.splitext(os.path.basename(display.replace("-m ", "")))[0] or "run"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = os.path.join("torchneck-out", f"{stem}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return path


def _missing_parents(path):
    """The folders os.makedirs(path) would create, outermost first."""
    missing = []
    while path and not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return list(reversed(missing))


def _remove_created(created):
    """Removes the folders we made, innermost first, if they are empty;
    never one that was there before."""
    for folder in reversed(created):
        if not os.path.isdir(folder):
            continue  # never made (the failure was making it)
        try:
            os.rmdir(folder)
        except OSError:  # not empty: it holds files that were written
            return


def _one_line(text):
    return " ".join(str(text).split())


def prepare_dir(requested, display):
    """Creates (or checks) the output folder before the script starts, so an
    unwritable one is an error before any work is done, not after. Returns
    its absolute path."""
    path = requested or _default_dir(display)
    cwd = os.getcwd()
    absolute = os.path.normpath(os.path.join(cwd, path))
    created = _missing_parents(absolute)
    try:
        os.makedirs(absolute, exist_ok=True)
        if not os.path.isdir(absolute):
            raise UsageError(f"cannot write the report to {path}: not a folder")
        probe = os.path.join(absolute, f".torchneck-write-test-{os.getpid()}")
        try:
            with open(probe, "w") as f:
                f.write("ok")
        finally:
            try:
                os.remove(probe)
            except OSError:
                pass
    except OSError as e:
        _remove_created(created)
        raise UsageError(f"cannot write the report to {path}: {e.strerror or e}") from None
    except UsageError:
        _remove_created(created)
        raise
    _prepared[absolute] = (path, cwd, created)
    return absolute


def discard_dir(out_dir):
    """For a failure after prepare_dir() but before the script starts (the
    native session cannot start): removes the folders prepare_dir made, if
    they are still empty, so a refused invocation leaves nothing behind."""
    _shown, _cwd, created = _prepared.pop(out_dir, (None, None, []))
    _remove_created(created)


def report(session, run_info, env, out_dir):
    """Collects and writes the files, then prints the report to stderr in one
    write, after the script's own output has been flushed. A failure to
    write is one line on stderr; returns whether the report was written."""
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
        text = session.finish(run_info, env, target, launch_cwd or cwd or "")
    except (RuntimeError, OSError) as e:
        text, error = None, e
    if isinstance(text, tuple):  # (report text, write error or None)
        text, error = text
    if text:
        try:
            sys.stderr.flush()
            data = ("\n" + text).encode("utf-8", "replace")
            while data:
                data = data[os.write(2, data):]
        except OSError:
            pass
    if error:  # last, where the user looks
        try:
            sys.stderr.write(f"torchneck: {_one_line(error)}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        _remove_created(created)  # only if nothing could be written into them
    return not error
