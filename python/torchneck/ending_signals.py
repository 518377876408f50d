"""The signals whose default action ends the process before any report: a
scheduler's SIGTERM, a closed terminal's SIGHUP, SIGUSR1, Ctrl-\\'s SIGQUIT.

While the script runs, the first of them to arrive becomes an exception in
its main thread (Terminated), so the runner writes the report; the process
then dies by that signal, as it would have unprofiled. A signal the script
handles itself, that was ignored when it started (nohup), or that native
code already handles (a library's own sigaction, which Python does not
see), is left alone."""

import contextlib
import os
import signal

# Each signal with the name of the run's ending it gives (_torchneck.Ending).
ENDINGS = {signal.SIGTERM: "sigterm", signal.SIGHUP: "sighup", signal.SIGUSR1: "sigusr1",
           signal.SIGQUIT: "sigquit"}


class Terminated(BaseException):
    """Raised in the main thread by one of ENDINGS' signals."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _caught_natively():
    """The signals this process catches at the C level (/proc's SigCgt): a
    handler a library installed with sigaction, which signal.getsignal
    still reports as SIG_DFL."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    mask = int(line.split()[1], 16)
                    return {s for s in ENDINGS if mask & (1 << (s - 1))}
    except (OSError, ValueError):
        pass
    return set()


def install(native_endings):
    """Our handler for each of ENDINGS' signals that has its default action
    and whose ending NATIVE_ENDINGS (_torchneck.Ending) can record (an
    extension built before SIGHUP, SIGUSR1 and SIGQUIT had endings records
    SIGTERM only). After the first, they all act as their default again: a
    second one ends the process at once, and so does one received in a
    forked child (a DataLoader worker). Returns the signals handled."""
    launcher_pid = os.getpid()
    handled = []

    def on_signal(signum, frame):
        uninstall(handled)
        if os.getpid() != launcher_pid:
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    on_signal.torchneck_ending = True  # set aside while torch waits holding the GIL (default_meanwhile)
    native = _caught_natively()
    try:
        for signum, ending in ENDINGS.items():
            if hasattr(native_endings, ending) and signal.getsignal(signum) == signal.SIG_DFL and signum not in native:
                signal.signal(signum, on_signal)
                handled.append(signum)
    except ValueError:  # not the main thread: leave signals alone
        pass
    return handled


def uninstall(handled):
    """Back to the default once the script is over (where it set no handler of its own)."""
    for signum in handled:
        if getattr(signal.getsignal(signum), "torchneck_ending", False):
            signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def default_meanwhile():
    """Each signal's default action meanwhile, in place of our handler (only
    that one: a handler of the script's own is left alone), for a wait in
    native code that holds the GIL: our handler could only run once it is
    over."""
    set_aside = []
    try:
        for signum in ENDINGS:
            handler = signal.getsignal(signum)
            if getattr(handler, "torchneck_ending", False):
                signal.signal(signum, signal.SIG_DFL)
                set_aside.append((signum, handler))
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in set_aside:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, handler)
