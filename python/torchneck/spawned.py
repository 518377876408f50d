"""Ranks started by torch.multiprocessing.spawn (or start_processes), as
pytorch/examples' imagenet starts them: each one profiled, their reports
merged when spawn returns (docs/distributed.md).

In the process that runs the script, SpawnLauncher replaces
torch.multiprocessing's start_processes, which spawn() calls, for the
length of the run. The function it is given is wrapped in SpawnedRank, a
picklable object of this module, which each spawned process (a fresh
interpreter) unpickles and calls as it would the function, with its index:
there it runs fn(index, *args) under a profiling session of its own
(runner.profile, as `torchneck run` runs a rank), writes the rank's report,
and raises what fn raised, so that spawn reports it as it would
unprofiled.

A rank's folder is DIR/rank-K, K its rank in the process group, which is
known only once fn calls init_process_group (this_rank.RankWatch); the spawn
index until then (and if it never does). While it runs its profile goes to
DIR/spawn-HOST-INDEX-PID; from init_process_group on, DIR/rank-K is a link
to that folder (a rank killed by kill -9 leaves its last spill under its
rank); when its session has stopped, the folder is renamed DIR/rank-K
before the report is written into it.

When spawn returns, or raises because a rank failed, the launching process
merges the ranks' reports into DIR and shows it; its own report then goes
to DIR/launcher."""

import functools
import inspect
import os
import shutil
import signal
import socket
import sys

from torchneck import output
from torchneck import this_rank
from torchneck.errors import UsageError
from torchneck.errors import one_line as _one_line
from torchneck.errors import say as _say
from torchneck.options import report_settings




class SpawnLauncher:
    """In the launching process: start_processes replaced, the ranks merged."""

    def __init__(self, native, options, target, out_dir, watch, session):
        # SESSION: (profile, load_native), runner's, passed in rather than
        # imported (runner imports this module); module-level functions, so
        # a spawned process unpickles them by name.
        self.session = session
        self.native = native
        self.options = options
        self.target = target
        self.base = out_dir
        self.watch = watch
        self.merged = False  # the ranks' merged report is in base
        self._patched = []

    def install(self):
        try:
            import torch.multiprocessing  # noqa: F401
            module = sys.modules["torch.multiprocessing.spawn"]
        except (ImportError, KeyError):
            return
        original = getattr(module, "start_processes", None)
        if original is None:
            return
        launcher = self

        @functools.wraps(original)
        def start_processes(*args, **kwargs):
            return launcher._start(original, args, kwargs)

        # spawn() calls its module's start_processes; torch.multiprocessing
        # names the same function.
        for owner in (module, sys.modules.get("torch.multiprocessing")):
            if owner is not None and getattr(owner, "start_processes", None) is original:
                owner.start_processes = start_processes
                self._patched.append((owner, original))

    def uninstall(self):
        for owner, original in self._patched:
            owner.start_processes = original
        self._patched = []

    def _not_profiled(self, start_method):
        if self.options.try_setting:
            return "--try measures one process"
        if start_method == "fork":
            return ("start_method='fork' copies this process, its profiling session with it "
                    "(spawn and forkserver start fresh interpreters)")
        if self.watch.distributed:
            return (f"this process is itself rank {self.watch.rank} of a launcher's job; its spawned processes "
                    "would write the same rank folders")
        return ""

    def _start(self, original, args, kwargs):
        try:
            bound = inspect.signature(original).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return original(*args, **kwargs)  # torch says what is wrong with the call
        bound.apply_defaults()
        a = bound.arguments
        why = self._not_profiled(a.get("start_method", "spawn"))
        if why or "fn" not in a or "join" not in a:
            if why:
                _say(f"torchneck: the processes torch.multiprocessing starts are not profiled: {why}")
            return original(*args, **kwargs)
        a["fn"] = SpawnedRank(a["fn"], {"options": self.options, "base": self.base, "session": self.session,
                                        "display": self.target.display, "argv": list(sys.argv)})
        join, a["join"] = a["join"], False
        context = original(*bound.args, **bound.kwargs)
        if not join:  # the script joins: merged when its join says every rank has ended
            self._merge_on_join(context)
            return context
        try:
            while not context.join():  # what start_processes does with join=True
                pass
        except BaseException:
            self._merge(context)
            raise
        self._merge(context)
        return None

    def _merge_on_join(self, context):
        join = context.join
        launcher = self
        done = []

        @functools.wraps(join)
        def joined(*args, **kwargs):
            try:
                finished = join(*args, **kwargs)
            except BaseException:
                if not done:
                    done.append(True)
                    launcher._merge(context)
                raise
            if finished and not done:
                done.append(True)
                launcher._merge(context)
            return finished

        context.join = joined

    def _merge(self, context):
        """The ranks' reports merged into DIR, as `torchneck torchrun`'s
        launcher does: what is there, what is missing said in its notes."""
        _wait_for(context)
        for folder in _settle_links(self.base):
            self._report_of_spill(folder)
        try:
            text = self.native.report_ranks(os.fsencode(self.base), os.fsencode(os.getcwd()),
                                            report_settings(self.options), strict=False)
        except RuntimeError as e:
            _say(f"torchneck: the spawned ranks' reports could not be merged ({_one_line(e)})")
            return
        self.merged = True
        output.show(text)

    def _report_of_spill(self, folder):
        """A rank that died before writing its report: the report of its
        last spill, as `torchneck report DIR/rank-K` would write it."""
        if not os.path.exists(os.path.join(folder, "profile.spill")):
            return
        try:
            self.native.report_from_spill(os.fsencode(folder), os.fsencode(os.getcwd()),
                                          report_settings(self.options))
        except RuntimeError as e:
            _say(f"torchneck: no report of {folder}'s last spill ({_one_line(e)})")

    def own_dir(self, out_dir):
        """Where this process's own report goes once the script has ended:
        DIR/launcher when DIR holds the ranks' merged report (its periodic
        spill, now stale, leaves DIR, where `torchneck report DIR` merges
        the ranks again); else DIR."""
        if not self.merged:
            return out_dir
        own = os.path.join(out_dir, "launcher")
        try:
            own = output.prepare_dir(own, self.target.display)
        except UsageError as e:
            _say(f"torchneck: {_one_line(e)}")
        try:
            spill = os.path.join(out_dir, "profile.spill")
            if os.path.exists(spill):
                os.remove(spill)
            workers = os.path.join(out_dir, "workers")
            if os.path.isdir(workers):
                shutil.rmtree(os.path.join(own, "workers"), ignore_errors=True)
                os.rename(workers, os.path.join(own, "workers"))
        except OSError as e:
            _say(f"torchneck: {own} could not be prepared ({_one_line(e)})")
        return own

    def said_own_report(self, own):
        _say(f"torchneck: the ranks' merged report is above, and in {output.shown(self.base)}; the launching "
             f"process's own report is in {os.path.join(output.shown(self.base), os.path.basename(own))}")


def _merge_wait_s():
    try:
        return float(os.environ.get(this_rank.MERGE_WAIT_ENV, this_rank.DEFAULT_MERGE_WAIT_S))
    except ValueError:
        return this_rank.DEFAULT_MERGE_WAIT_S


def _wait_for(context):
    """After a failure spawn has terminated and joined the ranks; after an
    interrupt of this process (Ctrl-C reaches the ranks too) they may still
    be writing their reports: a bounded wait for them."""
    import multiprocessing.connection
    import time

    deadline = time.monotonic() + _merge_wait_s()
    processes = list(getattr(context, "processes", []) or [])
    while True:
        alive = [p.sentinel for p in processes if p.is_alive()]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            if alive:
                _say(f"torchneck: {len(alive)} spawned rank(s) still running after {_merge_wait_s():.0f} s; "
                     "merging what is there")
            return
        multiprocessing.connection.wait(alive, timeout=left)


def _settle_links(base):
    """A rank that died before its report (kill -9, the out-of-memory
    killer) left DIR/rank-K as a link to its folder: the folder takes the
    name, as every other rank's does. Returns those folders."""
    settled = []
    try:
        names = os.listdir(base)
    except OSError:
        return settled
    for name in names:
        path = os.path.join(base, name)
        if not (name.startswith("rank-") and os.path.islink(path)):
            continue
        target = os.readlink(path)
        if os.sep in target or not target.startswith("spawn-"):
            continue  # not a link of ours
        try:
            os.unlink(path)
            os.rename(os.path.join(base, target), path)
            settled.append(path)
        except OSError as e:
            _say(f"torchneck: {path} could not take its folder's name ({_one_line(e)})")
    return settled


class SpawnedRank:
    """The function start_processes is given, as a spawned process calls it."""

    def __init__(self, fn, settings):
        self.fn = fn
        self.settings = settings

    def __call__(self, index, *args):
        return _run_rank(self, index, args)


def _host():
    return socket.gethostname().split(".")[0] or "host"


def _is_rank_folder(path):
    """A folder torchneck may replace: a link, an empty folder, or a rank's
    earlier report."""
    if os.path.islink(path):
        return True
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return not names or any(n in names for n in ("profile.spill", "profile.json", "report.txt"))


def _clear(path):
    """PATH free for this rank: True when it is, or was an earlier rank
    folder (or link) and is removed."""
    if not os.path.lexists(path):
        return True
    if not _is_rank_folder(path):
        return False
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)
    return True


class _Placement:
    """A spawned rank's folder (this module's docstring). runner.profile
    leaves what the target raised in `raised`."""

    def __init__(self, base, index):
        self.base = base
        self.index = index
        self.provisional = os.path.join(base, f"spawn-{_host()}-{index}-{os.getpid()}")
        self.watch = None
        self.raised = None
        self._linked = None

    def link(self, rank):
        """At init_process_group: DIR/rank-K names this rank's folder."""
        path = this_rank.rank_dir(self.base, rank)
        if path == self._linked:
            return
        self._unlink()
        if _clear(path):
            os.symlink(os.path.basename(self.provisional), path)
            self._linked = path

    def _unlink(self):
        if self._linked and os.path.islink(self._linked):
            os.unlink(self._linked)
        self._linked = None

    def place(self, out_dir, window):
        """Once the session has stopped: the folder becomes DIR/rank-K."""
        rank = self.watch.rank if self.watch is not None and self.watch.rank >= 0 else self.index
        final = this_rank.rank_dir(self.base, rank)
        try:
            self._unlink()
            if not _clear(final):
                raise OSError(f"{final} is there and is not a rank's folder")
            os.rename(out_dir, final)
        except OSError as e:
            _say(f"torchneck: rank {rank}'s report stays in {out_dir} ({_one_line(e)})")
            return out_dir
        output.moved(out_dir, final)
        window.out_dir = final
        if window.trace_path.startswith(out_dir + os.sep):
            window.trace_path = final + window.trace_path[len(out_dir):]
        return final


class _Call:
    """runner.profile's target in a spawned process: fn(index, *args). From
    the moment fn ends until the report is written, SIGTERM (spawn
    terminates the other ranks when one fails) waits: it is acted on once
    the report is there."""

    module = None

    def __init__(self, fn, index, call_args, settings):
        self.fn = fn
        self.index = index
        self.call_args = call_args
        self.display = settings["display"]
        self.argv = list(settings["argv"])
        self.args = self.argv[1:]
        main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
        self.path = getattr(main, "__file__", None)
        self.deferred = []
        self._handler = None

    def run(self):
        try:
            self.fn(self.index, *self.call_args)
        finally:
            def defer(signum, frame):
                self.deferred.append(signum)

            try:
                signal.signal(signal.SIGTERM, defer)
                self._handler = defer
            except ValueError:  # not the main thread
                pass

    def end_deferral(self):
        """SIGTERM back to its default; True when one came meanwhile."""
        if self._handler is not None and signal.getsignal(signal.SIGTERM) is self._handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return bool(self.deferred)


def _script_traceback(tb):
    """The traceback without this package's frames, as spawn shows it."""
    own = os.path.dirname(os.path.abspath(__file__))
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == own:
        tb = tb.tb_next
    return tb


def _run_rank(spawned, index, args):
    settings = spawned.settings
    profile, load_native = settings["session"]
    placement = _Placement(settings["base"], index)
    try:
        native = load_native()
        out_dir = output.prepare_dir(placement.provisional, settings["display"])
    except UsageError as e:
        _say(f"torchneck: spawned process {index} is not profiled: {_one_line(e)}")
        return spawned.fn(index, *args)
    watch = this_rank.RankWatch()
    # Until init_process_group says otherwise: the spawn index, which is the
    # process's local rank when one spawn starts a node's ranks.
    watch.rank = watch.local_rank = index
    watch.on_init = placement.link
    # The main module as the spawned process ran it (multiprocessing copies
    # its namespace into __mp_main__: fn's globals are the original one).
    main = sys.modules.get("__mp_main__")
    watch.rebind_in = [ns for ns in (getattr(spawned.fn, "__globals__", None), vars(main) if main else None)
                       if isinstance(ns, dict)]
    placement.watch = watch
    call = _Call(spawned.fn, index, args, settings)
    try:
        profile(native, settings["options"], call, watch, out_dir, rank=placement)
    except UsageError as e:  # profiling could not start: fn has not run
        output.discard_dir(out_dir)
        _say(f"torchneck: spawned process {index} is not profiled: {_one_line(e)}")
        return spawned.fn(index, *args)
    finally:
        terminated = call.end_deferral()
    if terminated:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)
    if placement.raised is not None:
        e = placement.raised
        raise e.with_traceback(_script_traceback(e.__traceback__))
    return None
