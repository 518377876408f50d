"""DataLoader worker processes, profiled in the worker (issue 6).

The main process gives every DataLoader with num_workers > 0 a worker_init_fn
that wraps the script's own (if any): `WorkerInit`, a picklable object, so it
reaches the worker under every start method: fork, spawn and forkserver,
whether the DataLoader names it (multiprocessing_context=) or the script set
the default (multiprocessing.set_start_method). In the worker it

  - under fork, stops and drops what the worker inherited from the main
    process's profiling session (threads do not survive fork; the data would
    be the parent's); a spawned worker, or one forked from the forkserver (a
    fresh interpreter that never profiled), inherits none;
  - starts a profiling session of its own (Python profile in the main
    process's mode, torch operators; no nn.Module scopes);
  - times each batch the worker produces (the Dataset fetch and collate), by
    wrapping the fetcher classes' fetch() in this process only;
  - registers a multiprocessing finalizer that, when the worker exits,
    writes its profile to DIR/workers/worker-<id>-<pid>.spill.

Then calls the script's worker_init_fn. The seeds the DataLoader gives each
worker are set before worker_init_fn runs and nothing here draws random
numbers, so the data (and the training) are those of an unprofiled run.

The main process merges the files when it writes its report
(model/processes.cc)."""

import os
import threading
import time

from torchneck import output
from torchneck.errors import say
from torchneck.os_bytes import shown

# Set in the main process by runner.run: the session a forked worker
# inherits (and must drop). None in a spawned worker.
_parent_session = None


class WorkerInit:
    """worker_init_fn: profile this worker, then run the script's own."""

    def __init__(self, user_fn, out_dir, python_mode, sample_hz, ops):
        self.user_fn = user_fn
        self.out_dir = os.path.abspath(out_dir)
        self.python_mode = python_mode
        self.sample_hz = sample_hz
        self.ops = ops

    def __call__(self, worker_id):
        try:
            _start(self, worker_id)
        except Exception as e:  # noqa: BLE001 - never break the script's data loading
            try:
                os.write(2, f"torchneck: DataLoader worker {worker_id} is not profiled: {shown(str(e))}\n".encode())
            except OSError:
                pass
        if self.user_fn is not None:
            self.user_fn(worker_id)


class _BatchClock:
    """Batches produced and the time spent producing them."""

    def __init__(self):
        self.batches = 0
        self.busy_s = 0.0
        self.max_s = 0.0


def _wrap_fetchers(clock):
    from torch.utils.data._utils import fetch

    for cls in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
        original = cls.fetch

        def timed(self, possibly_batched_index, _original=original):
            t0 = time.perf_counter()
            try:
                data = _original(self, possibly_batched_index)
            finally:
                dt = time.perf_counter() - t0
                clock.busy_s += dt
            clock.batches += 1
            if dt > clock.max_s:
                clock.max_s = dt
            return data

        cls.fetch = timed


def _start_method():
    """How this worker process was started ("spawn" or "forkserver"; "fork"
    is known from the inherited session). A DataLoader given a context starts
    that context's Process class, which names its method; with the default
    context, the child was told the parent's default in its preparation data
    (multiprocessing.spawn.prepare), for spawn and forkserver alike."""
    import multiprocessing

    method = getattr(multiprocessing.current_process(), "_start_method", None)
    # allow_none: never fixes a default the script has not chosen
    return method or multiprocessing.get_start_method(allow_none=True) or "spawn"


def _start(init, worker_id):
    global _parent_session
    inherited = _parent_session is not None
    if inherited:  # fork: the main process's session came along
        _parent_session.discard()
        _parent_session = None
    import torch
    from multiprocessing import util

    from torchneck import _torchneck
    from torchneck import env as envfacts
    from torchneck import facts

    session = _torchneck.Session(python_mode=init.python_mode, sample_hz=init.sample_hz, ops=init.ops,
                                 timeline_events_per_thread=16384, modules=False,
                                 memory_interval_ms=0, gc=False, nvml_interval_ms=0)
    clock = _BatchClock()
    _wrap_fetchers(clock)
    t0, t0_ns = time.perf_counter(), time.monotonic_ns()
    cpu0 = time.process_time()
    session.start()
    main_cpu_clock = time.pthread_getcpuclockid(threading.main_thread().ident)
    main_cpu0 = time.clock_gettime(main_cpu_clock)
    pid = os.getpid()
    start_method = "fork" if inherited else _start_method()

    def finish():
        if os.getpid() != pid:
            return
        session.stop()
        wall = time.perf_counter() - t0
        run = facts.run_info(script=f"DataLoader worker {worker_id}", argv=[], exit_code=0, ending="finished",
                             start_unix_s=0.0, wall_s=wall,
                             main_thread_cpu_s=time.clock_gettime(main_cpu_clock) - main_cpu0,
                             main_thread_runqueue_s=-1.0, process_cpu_s=-1.0,
                             machine_cpu_s=-1.0, machine_steal_s=-1.0)
        # The main process has the environment; a worker says only what may
        # differ in it.
        env = facts.env_facts(python="", torch=str(torch.__version__), cpu_cores=0,
                              torch_threads=int(torch.get_num_threads()), cuda=False, dataloaders=[], optimizers=[])
        process = facts.process_info(pid=pid, role="dataloader_worker", worker_id=int(worker_id),
                                     start_method=start_method, wall_s=wall, start_ns=t0_ns, busy_s=clock.busy_s,
                                     cpu_s=time.process_time() - cpu0, batches=clock.batches,
                                     batch_ns_max=int(clock.max_s * 1e9))
        try:
            folder = output.subfolder(init.out_dir, "workers")
            session.save(facts.run_facts(run=run, env=env, notes=[], thread_names=envfacts.thread_names(),
                                         main_tid=threading.main_thread().native_id, process=process,
                                         growing_graphs=[]),
                         os.path.join(folder, f"worker-{int(worker_id)}-{pid}.spill"))
        except (OSError, RuntimeError) as e:  # the main report goes on without this worker's
            say(f"torchneck: DataLoader worker {worker_id}'s profile was not written: {e}")

    # Run by multiprocessing when the worker process ends normally (its loop
    # returned), under fork and spawn alike; before the process exits.
    util.Finalize(None, finish, exitpriority=100)


def _remove_earlier_worker_profiles(out_dir):
    """An output folder used again (`-o DIR` twice) still holds the earlier
    run's worker profiles, which the report would merge as this run's
    processes: they go before this run starts any worker."""
    folder = os.path.join(out_dir, "workers")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith("worker-") and name.endswith(".spill"):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass


class WorkerProfiling:
    """In the main process: hands WorkerInit to each DataLoader with worker
    processes, and at the end shuts down the worker processes still alive,
    as the iterator's own __del__ would, so they exit through their loop
    and write their profiles (left alive, they would be terminated at
    interpreter exit without a word)."""

    def __init__(self, session, out_dir, options):
        self.session = session
        self.out_dir = out_dir
        self.options = options
        self._iterators = None
        self._wrapped = None
        _remove_earlier_worker_profiles(out_dir)

    def install(self):
        global _parent_session
        import weakref

        from torch.utils.data import dataloader

        _parent_session = self.session
        self._iterators = weakref.WeakSet()
        cls = dataloader._MultiProcessingDataLoaderIter
        original = cls.__init__
        iterators = self._iterators

        def __init__(it, *args, **kwargs):
            original(it, *args, **kwargs)
            iterators.add(it)

        cls.__init__ = __init__
        self._wrapped = (cls, original)

    def on_dataloader(self, loader):
        """Called for each new DataLoader (env.EnvCollector)."""
        if int(getattr(loader, "num_workers", 0) or 0) <= 0:
            return
        if isinstance(loader.worker_init_fn, WorkerInit):
            return
        o = self.options
        loader.worker_init_fn = WorkerInit(loader.worker_init_fn, self.out_dir, o.python_mode,
                                           o.sample_hz, o.ops)

    def shutdown_live_workers(self):
        global _parent_session
        _parent_session = None
        if self._wrapped is not None:
            cls, original = self._wrapped
            cls.__init__ = original
            self._wrapped = None
        for it in list(self._iterators or ()):
            try:
                it._shutdown_workers()
            except Exception:  # noqa: BLE001 - its own __del__ would ignore it too
                pass
