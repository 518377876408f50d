"""Ends in the way argv[1] says: ok, raise, exit3, exitstr, osexit, sigint,
segv (a real SIGSEGV in native code), abort (SIGABRT from C), wait (the test
signals it from outside, then closes its stdin).
Does a little torch work first so the report has content."""

import os
import signal
import sys
import time

import torch

how = sys.argv[1] if len(sys.argv) > 1 else "ok"
x = torch.ones(8, 8)
for _ in range(5):
    x = torch.mm(x, x) / 8
print("before", how, flush=True)
if how == "raise":
    raise ValueError("planted failure")
if how == "exit3":
    sys.exit(3)
if how == "exitstr":
    sys.exit("stopping with a message")
if how == "osexit":
    sys.stdout.flush()
    os._exit(7)
if how == "sigint":
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
if how == "segv_faulthandler":  # the script's own crash handler comes first
    import faulthandler

    faulthandler.enable()
    how = "segv"
if how == "segv":
    import ctypes

    sys.stdout.flush()
    ctypes.string_at(0)  # reads address 0 in C: SIGSEGV
if how == "abort":
    sys.stdout.flush()
    os.abort()  # abort(3): SIGABRT
if how == "wait":  # the test signals it from outside, then closes stdin
    import select

    print("ready", flush=True)
    # At most 30 s; a signal something else handles (Debian 13's torch
    # catches SIGHUP) lets it go on to its end once the test closes stdin.
    select.select([sys.stdin], [], [], 30)
print("after", flush=True)
