"""The output folder and the terminal report's one write to stderr."""

import datetime
import os
import sys

from torchneck.cli import UsageError


def _default_dir(display):
    stem = os.path.splitext(os.path.basename(display.replace("-m ", "")))[0] or "run"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = os.path.join("torchneck-out", f"{stem}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return path


def prepare_dir(requested, display):
    """Creates (or checks) the output folder before the script starts, so an
    unwritable one is an error before any work is done, not after."""
    path = requested or _default_dir(display)
    created = not os.path.exists(path)
    try:
        os.makedirs(path, exist_ok=True)
        if not os.path.isdir(path):
            raise UsageError(f"cannot write the report to {path}: not a folder")
        probe = os.path.join(path, ".torchneck-write-test")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        if created:
            try:
                os.removedirs(path)
            except OSError:
                pass
        raise UsageError(f"cannot write the report to {path}: {e.strerror}") from None
    return path


def report(session, run_info, env, out_dir):
    """Collects and writes the files, then prints the report to stderr in one
    write, after the script's own output has been flushed."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        text = session.finish(run_info, env, out_dir, os.getcwd())
    except RuntimeError as e:
        sys.stderr.write(f"torchneck: {e}\n")
        return False
    try:
        sys.stderr.flush()
        data = ("\n" + text).encode("utf-8", "replace")
        while data:
            data = data[os.write(2, data):]
    except OSError:
        pass
    return True
