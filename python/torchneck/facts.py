"""The facts Python hands to the native session, built in one place: one
function per struct of the extension (RunFacts, RunInfo, EnvFacts,
DataLoaderFacts, OptimizerFacts, ProcessInfo, GrowingGraph;
src/bindings/facts.h).

Every field is a required keyword argument, and the structs take no
attribute they do not have: a missing, misspelled or mistyped fact is an
error here, at once, not a default the report shows later. The extension is
imported on first use (it links the libtorch that `import torch` loads).

Text that may carry bytes the OS gave (a path, an argument, a name the
script made) is passed as os_bytes.shown makes it: the report names such
bytes as \\xff."""

from torchneck.os_bytes import shown


def _native():
    from torchneck import _torchneck

    return _torchneck


def run_info(*, script, argv, exit_code, ending, start_unix_s, wall_s, main_thread_cpu_s,
             main_thread_runqueue_s, process_cpu_s, machine_cpu_s, machine_steal_s):
    """The script and how it ended. ending: a name of _torchneck.Ending
    ("finished", "sys_exit", "exception", "keyboard_interrupt", "sigterm",
    "os_exit", "still_running"). Times in seconds; -1: unknown. machine_*:
    the whole machine's CPU and steal time over the run (env.machine_cpu)."""
    r = _native().RunInfo()
    r.script = shown(script)
    r.argv = [shown(str(a)) for a in argv]
    r.exit_code = exit_code
    r.ending = getattr(_native().Ending, ending)
    r.start_unix_s = start_unix_s
    r.wall_s = wall_s
    r.main_thread_cpu_s = main_thread_cpu_s
    r.main_thread_runqueue_s = main_thread_runqueue_s
    r.process_cpu_s = process_cpu_s
    r.machine_cpu_s = machine_cpu_s
    r.machine_steal_s = machine_steal_s
    return r


def dataloader_facts(*, num_workers, batch_size, pin_memory, persistent_workers, prefetch_factor,
                     dataset_type, created_at):
    """batch_size and prefetch_factor: None where the DataLoader has none."""
    d = _native().DataLoaderFacts()
    d.num_workers = num_workers
    d.batch_size = -1 if batch_size is None else batch_size
    d.pin_memory = pin_memory
    d.persistent_workers = persistent_workers
    d.prefetch_factor = -1 if prefetch_factor is None else prefetch_factor
    d.dataset_type = shown(dataset_type)
    d.created_at = shown(created_at)
    return d


def optimizer_facts(*, type, param_tensors, foreach):  # noqa: A002 - the struct's field name
    o = _native().OptimizerFacts()
    o.type = shown(type)
    o.param_tensors = param_tensors
    o.foreach = foreach
    return o


def env_facts(*, python, torch, cpu_cores, torch_threads, cuda, dataloaders, optimizers):
    """dataloaders and optimizers: lists of dataloader_facts / optimizer_facts."""
    e = _native().EnvFacts()
    e.python = python
    e.torch = torch
    e.cpu_cores = cpu_cores
    e.torch_threads = torch_threads
    e.cuda = cuda
    e.dataloaders = list(dataloaders)
    e.optimizers = list(optimizers)
    return e


def process_info(*, pid, role, worker_id, start_method, wall_s, start_ns, busy_s, cpu_s, batches, batch_ns_max):
    """role: "main" or "dataloader_worker"; worker_id -1 and start_method ""
    for the main process; start_ns: time.monotonic_ns() when wall_s began;
    cpu_s -1: unknown."""
    p = _native().ProcessInfo()
    p.pid = pid
    p.role = getattr(_native().ProcessRole, role)
    p.worker_id = worker_id
    p.start_method = start_method
    p.wall_s = wall_s
    p.start_ns = start_ns
    p.busy_s = busy_s
    p.cpu_s = cpu_s
    p.batches = batches
    p.batch_ns_max = batch_ns_max
    return p


def growing_graph(*, variable, scope, file, line, code, nodes_first, nodes_last, nodes_cap, step_first,
                  step_last, kept=True):
    """A tensor of the script whose autograd graph kept growing
    (graph_watch.py); file "" and line 0 when no accumulating line was found;
    kept False: the graph is rebuilt each step, larger every time."""
    g = _native().GrowingGraph()
    g.variable = shown(variable)
    g.scope = shown(scope)
    g.file = shown(file)
    g.line = line
    g.code = shown(code)
    g.nodes_first = nodes_first
    g.nodes_last = nodes_last
    g.nodes_cap = nodes_cap
    g.step_first = step_first
    g.step_last = step_last
    g.kept = kept
    return g


def rank_info(*, rank, world_size, local_rank, backend, host, job):
    """Who this process is in a distributed job (this_rank.py); -1 and "" when
    it is not one, or for what is unknown."""
    k = _native().RankInfo()
    k.rank = rank
    k.world_size = world_size
    k.local_rank = local_rank
    k.backend = shown(backend)
    k.host = shown(host)
    k.job = shown(job)
    return k


def run_facts(*, run, env, notes, thread_names, main_tid, process, growing_graphs, gpu_window=None, rank=None):
    """run: run_info(...); env: env_facts(...); process: process_info(...),
    or None for a spill's facts (the session describes its own process);
    thread_names: Linux thread id -> Python thread name; main_tid: Python's
    main thread, 0 for the thread that started the session; growing_graphs:
    a list of growing_graph(...); gpu_window: gpu_window.GpuWindow's
    facts() (a native GpuWindow), or None; rank: rank_info(...), or None
    outside a distributed job."""
    f = _native().RunFacts()
    f.run = run
    f.env = env
    f.notes = [shown(n) for n in notes]
    f.thread_names = {tid: shown(name) for tid, name in thread_names.items()}
    f.main_tid = main_tid
    f.process = process
    f.growing_graphs = list(growing_graphs)
    if gpu_window is not None:
        f.gpu_window = gpu_window
    if rank is not None:
        f.rank = rank
    return f
