"""Runs the user's script once under a native profiling session, the way
`python SCRIPT` or `python -m MODULE` would, and writes the report whatever
way the script ends. Exit status: the script's own."""

import builtins
import os
import signal
import sys
import threading
import time
import traceback
import types

from torchneck import backward_scope
from torchneck import coexist
from torchneck import ending_signals
from torchneck import env as envfacts
from torchneck import facts as runfacts
from torchneck import gpu_window
from torchneck import graph_watch
from torchneck import mode_marks
from torchneck import output
from torchneck import this_rank
from torchneck import spawned
from torchneck import workers
from torchneck.errors import UsageError
from torchneck.errors import one_line
from torchneck.errors import say
from torchneck.options import report_settings


class _Target:
    """What to run: a compiled script, or a module spec for -m."""

    def __init__(self, options):
        self.module = options.module
        self.args = options.args
        if self.module is not None:
            self._resolve_module()
        else:
            self._compile_script(options.script)

    def _compile_script(self, script):
        self.path = os.path.abspath(script)
        if not os.path.exists(script):
            raise UsageError(f"cannot run {script}: no such file")
        if os.path.isdir(script):
            raise UsageError(f"cannot run {script}: it is a directory, not a Python script")
        try:
            with open(script, "rb") as f:
                source = f.read()
        except OSError as e:
            raise UsageError(f"cannot read {script}: {e.strerror}") from None
        try:
            self.code = compile(source, self.path, "exec", dont_inherit=True)
        except SyntaxError as e:
            raise UsageError(f"syntax error in {script}, line {e.lineno}: {e.msg}") from None
        except ValueError as e:  # e.g. null bytes
            raise UsageError(f"cannot compile {script}: {e}") from None
        self.display = script
        self.argv = [script] + self.args

    def _resolve_module(self):
        import importlib.util

        sys.path.insert(0, os.getcwd())  # as `python -m` does
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError) as e:
            spec = None
            why = str(e)
        else:
            why = "no module named " + repr(self.module)
        finally:
            sys.path.pop(0)
        if spec is None:
            raise UsageError(f"cannot run -m {self.module}: {why}")
        self.display = "-m " + self.module
        self.argv = [spec.origin or self.module] + self.args

    def run(self):
        """Runs the target as __main__; returns nothing, raises what it raises."""
        import runpy

        if self.module is not None:
            sys.argv = [self.module] + self.args  # runpy puts the file path in argv[0]
            sys.path[0] = os.getcwd()  # as `python -m MODULE` sets it
            runpy.run_module(self.module, run_name="__main__", alter_sys=True)
            return
        sys.argv = list(self.argv)
        sys.path[0] = os.path.dirname(self.path)  # as `python SCRIPT` sets it
        main = types.ModuleType("__main__")
        main.__file__ = self.path
        main.__builtins__ = builtins
        main.__cached__ = None
        sys.modules["__main__"] = main
        exec(self.code, main.__dict__)


def _exit_code(exc, say=True):
    """The status `python SCRIPT` would exit with for this SystemExit (SAY:
    print a code that is not a number, as Python does)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    if say:
        sys.stderr.write(f"{code}\n")  # python prints a non-int code and exits 1
    return 1


def _print_script_traceback(exc):
    """The traceback Python would print, without the launcher's frames."""
    tb = exc.__traceback__
    own = os.path.dirname(os.path.abspath(__file__))
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == own:
        tb = tb.tb_next
    while tb is not None and tb.tb_frame.f_code.co_filename.endswith(("runpy.py", "<frozen runpy>")):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _die_by(signum):
    """Exit the way an unhandled signal would: the parent sees the signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _runqueue_s(tid):
    """Seconds thread `tid` of this process has spent runnable but waiting
    for a CPU (field 2 of Linux's schedstat); -1 where unknown."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return -1.0


def _load_native():
    """torch, then the extension (it links the libtorch that torch loaded);
    a missing one is a one-line error, not a traceback."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise UsageError(f"{sys.executable} cannot import torch ({e}); run torchneck with the Python "
                         "that runs your training (PYTHON=... make build)") from None
    try:
        from torchneck import _torchneck
    except ImportError as e:
        raise UsageError(f"the native part of torchneck is not built for {sys.executable} ({e}); "
                         "run `make build` in the torchneck folder") from None
    return _torchneck


def _experiments(native, options, target, out_dir, wall_s):
    """run --try (experiment.py): the setting's runs, then the report again
    with them; the profiled run's report alone if they cannot be run or are
    interrupted."""
    from torchneck import experiment

    text = output.held.pop(out_dir)
    # The script's objects stay alive in its module; what torch's caching
    # allocator keeps beyond them is handed back for the experiments' runs.
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch.cuda, "is_initialized", lambda: False)():
        torch.cuda.empty_cache()
    progress = say
    try:
        settings, why = experiment.settings_to_try(options.try_setting, out_dir)
        if why:
            progress(f"torchneck: {why}")
        if settings:
            argv = (["-m", target.module] if target.module is not None else [target.path]) + list(target.args)
            # A run of a few steps should take well under the profiled run's
            # time; five times it (at least a minute) is a run that will not
            # stop. TORCHNECK_TRY_TIMEOUT_S sets it (docs/try.md).
            timeout = max(60.0, 5 * wall_s)
            try:
                timeout = float(os.environ.get("TORCHNECK_TRY_TIMEOUT_S", timeout))
            except ValueError:
                progress("torchneck: TORCHNECK_TRY_TIMEOUT_S is not a number of seconds; "
                         f"using {timeout:.0f} s")
            found = experiment.run_experiments(native, settings, argv, options.try_steps, timeout, progress)
            text = native.report_with_experiments(out_dir, os.getcwd(), found, report_settings(options))
    except KeyboardInterrupt:
        progress("torchneck: --try interrupted: the report is the profiled run's alone")
    except (RuntimeError, OSError) as e:
        progress(f"torchneck: --try failed ({one_line(e)}): the report is the profiled run's alone")
    output.show(text)


def _rank_output(options, target, watch):
    """A rank of a distributed job writes BASE/rank-K (this_rank.py); None for
    one process."""
    if not watch.distributed:
        return None
    if options.try_setting:
        raise UsageError("--try measures one process; it is not run under a distributed launcher "
                         "(profile the job, then --try one rank's script alone)")
    base = this_rank.base_dir(options.output) or this_rank.default_base(target.display)
    return base, this_rank.rank_dir(base, watch.rank)


def _show_rank_report(native, options, watch, job, out_dir):
    """Each rank's report stays in its folder. Under `torchneck torchrun`
    the launcher shows the merged one; under a launcher of the user's own,
    rank 0 waits (bounded) for the others and merges them here."""
    text = output.held.pop(out_dir, None)
    if this_rank.launcher_merges() or text is None:
        return
    base, _ = job
    if watch.rank != 0:
        say(f"torchneck: rank {watch.rank}'s report is in {out_dir}; rank 0 merges the job's in {base}")
        return
    try:
        wait_s = float(os.environ.get(this_rank.MERGE_WAIT_ENV, this_rank.DEFAULT_MERGE_WAIT_S))
    except ValueError:
        wait_s = this_rank.DEFAULT_MERGE_WAIT_S
    if not this_rank.wait_for_ranks(base, watch.world_size, wait_s):
        say(f"torchneck: not every rank had finished after {wait_s:.0f} s; merging what is there "
            f"(`torchneck report {base}` merges again)")
    try:
        output.show(native.report_ranks(os.fsencode(base), os.fsencode(os.getcwd()), report_settings(options),
                                        strict=False))
    except RuntimeError as e:
        say(f"torchneck: the ranks' reports could not be merged ({one_line(e)}); rank 0's report follows")
        output.show(text)


def run(options):
    target = _Target(options)  # UsageError before anything starts
    native = _load_native()
    watch = this_rank.RankWatch()
    job = _rank_output(options, target, watch)
    out_dir = output.prepare_dir(job[1] if job else options.output, target.display)
    return profile(native, options, target, watch, out_dir, job)


def _detail_mode(options, job, rank):
    """--detail (auto by default): auto is window (docs/overhead.md); with
    a GPU window the detail is held on until it closes (gpu_window.py).
    A rank of a distributed job (auto or window) has its windows on the
    fixed schedule ("lockstep", core/detail_window.h), not sized by its own
    measured cost: every rank then details the same steps, which the
    cross-rank comparison needs; a process that learns it is a rank when
    it joins its process group switches then (RankWatch.on_joined). A rank
    with a GPU window is detailed throughout under auto: each rank's GPU
    window opens when its own steps settle, and holding the detail on for
    it would leave the ranks' schedules apart."""
    if options.detail == "full":
        return "full"
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    if job is not None or rank is not None or world > 1:
        return "full" if options.detail == "auto" and _gpu_window_expected(options) else "lockstep"
    return "window"


def _gpu_window_expected(options):
    """Whether the GPU window may open: --gpu=on, or auto with CUDA."""
    if options.gpu == "on":
        return True
    if options.gpu == "auto":
        try:
            import torch
            return bool(torch.cuda.is_available())
        except Exception:  # noqa: BLE001 - a broken CUDA install is no GPU (gpu_window.py)
            return False
    return False


def profile(_torchneck, options, target, watch, out_dir, job=None, rank=None):
    """Runs TARGET under a profiling session writing OUT_DIR; returns the
    exit status. JOB: (base, out_dir) of a launcher's rank (_rank_output).
    RANK: a process torch.multiprocessing.spawn started (spawned.py): its
    report is not shown (the launching process merges the ranks'), its
    folder is named by RANK.place once the session has stopped, and what
    the target raised is left in RANK.raised for spawn to report, as it
    would unprofiled."""
    run = _ProfiledRun(_torchneck, options, target, watch, out_dir, job, rank)
    run.start()
    exit_code, ending, raised, died_by = run.run_target()
    run.finish(exit_code, ending)
    run.show_report()
    # The script's module stays sys.modules["__main__"]: its atexit handlers
    # and objects pickled by reference still find it.
    sys.argv, sys.path[:] = run.saved_argv, run.saved_path
    if rank is not None and raised is not None:
        rank.raised = raised
        return exit_code
    if died_by is not None:
        # What Python does for an uncaught KeyboardInterrupt, and what the
        # default action of ending_signals' signals is: die by the signal.
        _die_by(died_by)
    return exit_code


def _new_session(_torchneck, options, detail, out_dir):
    """The native session for these options; a UsageError (and OUT_DIR
    discarded) when they cannot start one."""
    # The one switch of the NVML sampler: 0 turns it off, as --gpu=off does.
    nvml_interval_ms = 0 if options.gpu == "off" else options.nvml_interval_ms
    try:
        return _torchneck.Session(
            python_mode=options.python_mode,
            sample_hz=options.sample_hz,
            ops=options.ops,
            timeline_events_per_thread=options.timeline_events,
            timeline_steps=options.timeline_steps,
            report=report_settings(options),
            memory_interval_ms=options.memory_interval_ms,
            gc=options.gc,
            nvml_interval_ms=nvml_interval_ms,
            detail=detail,
        )
    except (RuntimeError, ValueError) as e:
        output.discard_dir(out_dir)
        raise UsageError(f"cannot start profiling: {e}") from None


class _ProfiledRun:
    """One profile() call: the session and the Python-side collectors wired
    to it (made in order), started around the target, stopped and reported
    once (finish), whether the script returns, raises or calls os._exit."""

    def __init__(self, _torchneck, options, target, watch, out_dir, job, rank):
        self.native, self.options, self.target, self.watch = _torchneck, options, target, watch
        self.out_dir, self.job, self.rank = out_dir, job, rank
        self.detail = _detail_mode(options, job, rank)
        self.session = _new_session(_torchneck, options, self.detail, out_dir)
        self.facts = envfacts.EnvCollector()
        self.start_unix = time.time()
        self.ended = []
        self.profiled_wall = []
        self.placed = []  # the folder the report went to
        self.launcher_pid = os.getpid()
        # The main thread's CPU clock, readable from any thread (os._exit may
        # be called from one).
        self.main_cpu_clock = time.pthread_getcpuclockid(threading.main_thread().ident)
        self.real_exit = os._exit
        self._wire_collectors()
        self.saved_argv, self.saved_path = sys.argv, list(sys.path)

    def _wire_collectors(self):
        native, options, detail, watch = self.native, self.options, self.detail, self.watch
        self.facts.on_change = self.env_changed
        self.worker_profiling = workers.WorkerProfiling(self.session, self.out_dir, options)
        self.facts.on_dataloader = self.worker_profiling.on_dataloader
        self.graphs = graph_watch.GraphWatch(getattr(self.target, "path", None) or self.target.argv[0],
                                             (native.open_user_scope, native.close_user_scope) if options.ops
                                             else None)
        self.facts.on_optimizer = self.graphs.watch
        if options.ops and detail != "full":
            # Between detail windows the module hooks are removed, not idle:
            # global hooks slow every module call (docs/overhead.md).
            self.graphs.step_listeners.append(lambda steps: native.sync_module_hooks())
        if detail == "window":
            watch.on_joined.append(lambda rank, world: native.detail_lockstep() if world > 1 else None)
        watch.on_joined.append(self.joined)
        self.facts.install()
        self.backward = backward_scope.BackwardScope().install(native) if options.ops else None
        self.mode_marks = mode_marks.ModeMarks().install(native) if options.ops else None
        watch.install()
        # In the process that runs the script: ranks it starts with
        # torch.multiprocessing.spawn are profiled too (spawned.py).
        self.spawns = spawned.SpawnLauncher(native, options, self.target, self.out_dir, watch,
                                            (profile, _load_native)) if self.rank is None else None
        if self.spawns is not None:
            self.spawns.install()
        self.guard = coexist.Guard(options)
        self.window = gpu_window.GpuWindow(options.gpu, options.gpu_steps, self.out_dir, self.guard,
                                           hold_detail=native.hold_detail if detail == "window" else None,
                                           events_ended=native.events_ended if options.ops else None)

    def spill_facts(self):
        """What a spill (or a crash report) says about the run so far; the
        session adds the times, this process and the ending."""
        run = runfacts.run_info(script=self.target.display, argv=self.target.argv, exit_code=0,
                                ending="still_running", start_unix_s=self.start_unix, wall_s=0.0,
                                main_thread_cpu_s=-1.0, main_thread_runqueue_s=-1.0, process_cpu_s=-1.0,
                                machine_cpu_s=-1.0, machine_steal_s=-1.0)
        return runfacts.run_facts(run=run, env=self.facts.snapshot(probe_cuda=False), notes=self.facts.notes,
                                  thread_names={}, main_tid=0, process=None, growing_graphs=[],
                                  rank=self.watch.facts())

    def env_changed(self):
        """A spill (or a crash report) describes the environment as it is."""
        try:
            self.session.set_info(self.spill_facts())
        except Exception:  # noqa: BLE001 - facts for spills only; never break the script
            pass

    def joined(self, rank, world):
        """A process that learns it is a rank when it joins its process
        group: its spills say so from now on, the first one now. A rank
        killed before the next scheduled spill (they come 1, 3, 7, 15 s in)
        left only spills from before it joined, which the ranks' merge
        cannot place."""
        self.env_changed()
        self.session.spill_soon()

    def start(self):
        """The clocks read, the ending signals and os._exit caught, the
        session and its spills started, then the collectors: a collector
        that cannot start is a UsageError before the script runs."""
        self.t0, self.t0_ns = time.perf_counter(), time.monotonic_ns()
        self.cpu0 = time.clock_gettime(self.main_cpu_clock)
        self.process_cpu0 = time.process_time()
        self.main_native_id = threading.main_thread().native_id
        self.runqueue0 = _runqueue_s(self.main_native_id)
        self.machine0 = envfacts.machine_cpu()
        self.signals_handled = ending_signals.install(self.native.Ending)
        os._exit = self.exit_now
        options = self.options
        try:
            self.session.start()
            self.session.start_spill(self.out_dir, os.getcwd(),
                                     first_s=min(1.0, options.spill_interval) if options.spill_interval > 0 else 0.0,
                                     max_interval_s=options.spill_interval)
        except RuntimeError as e:  # a collector that cannot start: before the script, so exit 2
            self.session.stop()
            self.facts.uninstall()
            ending_signals.uninstall(self.signals_handled)
            os._exit = self.real_exit
            output.discard_dir(self.out_dir)
            raise UsageError(f"cannot start profiling: {e}") from None
        self.worker_profiling.install()
        self.graphs.install()
        self.window.install(self.graphs)
        # Not through env_changed(): a fact that is missing or misspelled is an
        # error here, before the script, rather than a spill without facts.
        self.session.set_info(self.spill_facts())
        self.guard.install()

    def run_target(self):
        """Runs the script; returns (exit status, ending, what it raised for
        a spawned rank's spawn, the signal it would have died by)."""
        session, rank = self.session, self.rank
        try:
            self.target.run()
            return 0, "finished", None, None
        except SystemExit as e:
            # A spawned rank's status is printed as it exits.
            return _exit_code(e, say=rank is None), "sys_exit", e, None
        except KeyboardInterrupt as e:
            session.stop()
            if rank is None:
                _print_script_traceback(e)
            return 128 + signal.SIGINT, "keyboard_interrupt", e, signal.SIGINT
        except ending_signals.Terminated as e:
            session.stop()
            return 128 + e.signum, ending_signals.ENDINGS[e.signum], None, e.signum
        except BaseException as e:  # noqa: B902 - the script's own error
            session.stop()
            if rank is None:
                _print_script_traceback(e)
            return 1, "exception", e, None
        finally:
            os._exit = self.real_exit
            session.stop()

    def exit_now(self, code):
        """os._exit skips every cleanup: write the report first (in this
        process only, not in a forked child such as a DataLoader worker)."""
        if os.getpid() == self.launcher_pid:
            try:
                self.finish(int(code) & 0xFF, "os_exit")
            except BaseException:  # noqa: B902 - exiting regardless
                pass
        self.real_exit(code)

    def finish(self, code, ending):
        """Stops the collectors and writes the report, once."""
        if self.ended:
            return
        self.ended.append(code)
        ending_signals.uninstall(self.signals_handled)
        self.session.stop()
        wall = time.perf_counter() - self.t0
        main_cpu = time.clock_gettime(self.main_cpu_clock) - self.cpu0
        process_cpu = time.process_time() - self.process_cpu0
        machine = [(now - then) if then >= 0 and now >= 0 else -1.0
                   for now, then in zip(envfacts.machine_cpu(), self.machine0)]
        self.window.finish(self.graphs.steps)  # the trace's export is not the script's time
        self.worker_profiling.shutdown_live_workers()  # they write their profiles as they exit
        self._uninstall_collectors()
        report_dir = self.out_dir
        if self.spawns is not None:
            report_dir = self.spawns.own_dir(self.out_dir)  # DIR/launcher once the ranks are merged into DIR
        elif self.rank is not None:
            report_dir = self.rank.place(self.out_dir, self.window)  # DIR/rank-K
        self.placed.append(report_dir)
        runqueue = (_runqueue_s(self.main_native_id) - self.runqueue0) if self.runqueue0 >= 0 else -1.0
        run = runfacts.run_info(
            script=self.target.display, argv=sys.argv, exit_code=code, ending=ending, start_unix_s=self.start_unix,
            wall_s=wall, main_thread_cpu_s=main_cpu, main_thread_runqueue_s=runqueue, process_cpu_s=process_cpu,
            machine_cpu_s=machine[0],
            machine_steal_s=machine[1])
        process = runfacts.process_info(pid=self.launcher_pid, role="main", worker_id=-1, start_method="",
                                        wall_s=wall, start_ns=self.t0_ns, busy_s=main_cpu, cpu_s=process_cpu,
                                        batches=0, batch_ns_max=0)
        self.profiled_wall.append(wall)
        facts = runfacts.run_facts(run=run, env=self.facts.snapshot(), notes=self.facts.notes + self.guard.notes(),
                                   thread_names=envfacts.thread_names(),
                                   main_tid=threading.main_thread().native_id, process=process,
                                   growing_graphs=self.graphs.growing_graphs(),
                                   gpu_window=self.window.facts(self.native), rank=self.watch.facts())
        # run --try holds the report back for the one with its experiments:
        # only after a script that ended well and returns here (not
        # os._exit's, which exits at once).
        held = (self.watch.distributed or self.rank is not None or report_dir != self.out_dir
                or (self.options.try_setting and code == 0 and ending in ("finished", "sys_exit")))
        output.report(self.session, facts, report_dir, show_now=not held)

    def _uninstall_collectors(self):
        self.facts.uninstall()
        if self.backward is not None:
            self.backward.uninstall()
        if self.mode_marks is not None:
            self.mode_marks.uninstall()
        self.graphs.uninstall()
        self.guard.uninstall()
        self.watch.uninstall()
        if self.spawns is not None:
            self.spawns.uninstall()

    def show_report(self):
        """The report held back by finish, where this process shows it."""
        out_dir, options, placed = self.out_dir, self.options, self.placed
        if self.job is not None:
            _show_rank_report(self.native, options, self.watch, self.job, out_dir)
        elif self.rank is not None or (placed and placed[0] != out_dir):
            output.held.pop(placed[0] if placed else out_dir, None)
            if self.spawns is not None:
                self.spawns.said_own_report(placed[0])
        elif out_dir in output.held and options.try_setting:  # run --try: the experiments, then the report with them
            wall = self.profiled_wall[0] if self.profiled_wall else 0.0
            _experiments(self.native, options, self.target, out_dir, wall)
        elif out_dir in output.held:  # a process that joined a process group of its own: its report, shown now
            output.show(output.held.pop(out_dir))
