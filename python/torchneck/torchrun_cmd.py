"""`torchneck torchrun [run options] [torchrun options] SCRIPT [ARGS...]`:
torch's own launcher (torch.distributed.run, the elastic agent) starts the
ranks, each one as `python -m torchneck run ... SCRIPT ARGS`, writing
DIR/rank-K; when torchrun returns, the ranks' reports are merged into DIR
and shown. Exit status: torchrun's own.

torchrun runs in a child process (`python -m torchneck.torchrun_cmd`),
with the work-arounds its environment needs (_work_arounds), each said in
one line."""

import os
import signal
import subprocess
import sys

from torchneck import this_rank
from torchneck.options import OPTIONS, REPORT_OPTIONS
from torchneck import rendezvous
from torchneck.errors import UsageError
from torchneck.errors import one_line
from torchneck.errors import say

# run's options that take no value (options.py); every other option of
# run's takes one. torchrun has none of these names.
_RUN_FLAGS = ("--no-ops", "--no-gc")


def split_options(argv, run_options):
    """(run's options, torchrun's argv): run's own options, anywhere before
    the script, are taken out; the rest is torchrun's."""
    ours, theirs = [], []
    i = 0
    names = set(run_options) | {"-o"}
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in names:
            ours.append(a)
            if "=" not in a and name not in _RUN_FLAGS:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                ours.append(argv[i + 1])
                i += 1
        elif not a.startswith("-"):
            # The script, or a torchrun option's value: torchrun's parser sorts
            # that out; run's options are only read before it.
            theirs.extend(argv[i:])
            break
        else:
            theirs.append(a)
        i += 1
    return ours, theirs


def rank_command(torchrun_argv, run_args):
    """torchrun's argv with each rank as `python -m torchneck run RUN_ARGS
    SCRIPT ARGS`, the script's display name, and torchrun's options as its
    parser reads them."""
    from torch.distributed.run import get_args_parser

    try:
        parsed = get_args_parser().parse_args(torchrun_argv)
    except SystemExit as e:  # argparse printed its own line
        if e.code:
            raise UsageError("torchrun's options could not be read (its message is above)") from None
        raise
    if getattr(parsed, "no_python", False):
        raise UsageError("--no_python runs a program that is not Python; torchneck profiles Python scripts "
                         "(keep your launch line and start `torchneck run` in it: torchrun --no_python "
                         "torchneck run SCRIPT)")
    script, script_args = parsed.training_script, list(parsed.training_script_args)
    n = len(script_args) + 1
    if torchrun_argv[-n:] != [script] + script_args:
        raise UsageError("cannot tell torchrun's options from the script's; put the script after them")
    before = [a for a in torchrun_argv[:-n] if a not in ("-m", "--module")]
    target = ["-m", script] if getattr(parsed, "module", False) else [script]
    return before + ["-m", "torchneck", "run"] + run_args + target + script_args, (
        ("-m " + script) if getattr(parsed, "module", False) else script), parsed


def run(argv, run_options):
    run_args, torchrun_argv = split_options(argv, run_options)
    if "--help" in torchrun_argv[:1] or "-h" in torchrun_argv[:1] or not torchrun_argv:
        raise UsageError("torchrun needs a script: torchneck torchrun [-o DIR] [torchrun options] SCRIPT [ARGS...]")
    try:
        import torch  # noqa: F401
        from torchneck import _torchneck
    except ImportError as e:
        raise UsageError(f"{sys.executable} cannot load torch and torchneck's native part ({e})") from None
    if any(a.startswith("--try") for a in run_args):
        raise UsageError("--try measures one process; it is not run under torchrun")
    command, display, parsed = rank_command(torchrun_argv, _strip_output(run_args))
    # -o is the job's folder, prepared here (one line and exit 2 if it
    # cannot be written, before any rank starts); each rank writes rank-K.
    out = None
    for i, a in enumerate(run_args):
        if a in ("-o", "--output") and i + 1 < len(run_args):
            out = run_args[i + 1]
        elif a.startswith("--output="):
            out = a.split("=", 1)[1]
    from torchneck import output

    base = output.prepare_dir(out, display, shared=True)  # every node's launcher writes into it
    # A rendezvous on another node that never answers: one line and exit 2
    # after a bounded wait, before any rank starts (rendezvous.py).
    try:
        rendezvous.check_torchrun(parsed)
    except UsageError:
        output.discard_dir(base)
        raise
    env = dict(os.environ)
    env[this_rank.RANKS_DIR_ENV] = base
    # The agent forwards SIGINT/SIGTERM to the ranks and returns; meanwhile
    # this process waits, to merge what they wrote.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = subprocess.call([sys.executable, "-m", "torchneck.torchrun_cmd"] + command, env=env)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        text = _torchneck.report_ranks(os.fsencode(base), os.fsencode(os.getcwd()), _report_settings(run_args),
                                       strict=False)
    except RuntimeError as e:
        say(f"torchneck: no merged report: {one_line(e)}")
        return code if code != 0 else 1
    output.show(text)
    return code if code >= 0 else 128 - code


def _strip_output(command):
    """The ranks take their folder from TORCHNECK_RANKS_DIR, not -o."""
    out, skip = [], False
    for a in command:
        if skip:
            skip = False
            continue
        if a in ("-o", "--output"):
            skip = True
            continue
        if a.startswith("--output="):
            continue
        out.append(a)
    return out


def _value(run_args, name, default):
    for i, a in enumerate(run_args):
        if a == name and i + 1 < len(run_args):
            return int(run_args[i + 1])
        if a.startswith(name + "="):
            return int(a.split("=", 1)[1])
    return default


def _report_settings(run_args):
    """The report settings among the run options (each an integer)."""
    return {OPTIONS[n].dest: _value(run_args, n, OPTIONS[n].default) for n in REPORT_OPTIONS}


def _fix_std_from_str():
    """torch 1.13 on Python 3.11: iterating an IntFlag skips its members
    that are not one bit, so Std.from_str("0") (the default --redirects and
    --tee) is None and the agent fails with "'NoneType' object has no
    attribute 'get'". Returns what was worked around, or ""."""
    try:
        from torch.distributed.elastic.multiprocessing.api import Std
    except ImportError:
        return ""
    if Std.from_str("0") is not None:
        return ""
    original = Std.from_str.__func__

    def from_str(cls, vm):
        value = original(cls, vm)  # keeps torch's own validation of VM
        if isinstance(value, dict):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        return cls(int(vm))

    Std.from_str = classmethod(from_str)
    return "torch 1.13's Std.from_str on Python 3.11 (None for '0', the default --redirects/--tee)"


def _without_libuv():
    """torch 2.x built without libuv (Debian's): every TCPStore the agent
    makes asks for libuv and fails. True when a local store says so."""
    try:
        import torch.distributed as dist
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True)
        del store
        return False
    except TypeError:  # a torch without the use_libuv argument (1.13): no libuv asked for
        return False
    except RuntimeError as e:
        return "libuv" in str(e)


def _stores_without_libuv():
    """torch 2.x built without libuv: the TCPStores the agent makes
    itself (the c10d and static rendezvous' stores, the agent's own) ask
    for libuv whatever USE_LIBUV says; here they are made without it."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, static_tcp_rendezvous

    original = dist.TCPStore

    class TCPStore(original):
        def __init__(self, *args, **kwargs):
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)

    dist.TCPStore = TCPStore
    for module in (c10d_rendezvous_backend, static_tcp_rendezvous):
        if getattr(module, "TCPStore", None) is original:
            module.TCPStore = TCPStore


def _rendezvous_without_libuv(argv, tmp):
    """Ranks that host their own store without libuv (the agent's, shared,
    would be joined by clients that ask for libuv; USE_LIBUV=0 is read by
    init_process_group's env:// rendezvous), and the agent's own stores
    made without it. The agent's rendezvous on a file store (single host),
    unless the user chose their own rendezvous, which is then kept (several
    nodes)."""
    _stores_without_libuv()
    os.environ["USE_LIBUV"] = "0"
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    if any(a.split("=", 1)[0] in ("--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint", "--rdzv-endpoint",
                                  "--standalone", "--master_addr", "--master-addr") for a in argv):
        return argv, ("torch built without libuv: the agent's stores without it, each job's store on its rank 0, "
                      "USE_LIBUV=0 in the ranks (your own rendezvous options are kept)")
    endpoint = os.path.join(tmp, "rdzv")
    return (["--rdzv_backend=c10d", "--rdzv_conf=store_type=file", f"--rdzv_endpoint={endpoint}"] + argv,
            "torch built without libuv: the rendezvous on a file store, USE_LIBUV=0 in the ranks")


def _main():
    import tempfile

    argv = sys.argv[1:]
    said = [w for w in [_fix_std_from_str()] if w]
    with tempfile.TemporaryDirectory(prefix="torchneck-torchrun-") as tmp:
        if _without_libuv():
            argv, what = _rendezvous_without_libuv(argv, tmp)
            said.append(what)
        if said:
            sys.stderr.write("torchneck: worked around in torchrun: " + "; ".join(said) + "\n")
            sys.stderr.flush()
        from torch.distributed.run import main

        sys.argv = ["torchrun"] + argv
        main(argv)


if __name__ == "__main__":
    _main()
