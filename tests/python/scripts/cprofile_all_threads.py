"""Oracle: runs a script as __main__ and dumps cProfile's call counts for
every thread it runs, as a pstats file. Usage: cprofile_all_threads.py
OUT.pstats SCRIPT

Python <= 3.11: cProfile itself, on the main thread AND on every thread the
script starts (cProfile alone profiles only its own thread); the stats are
merged.

Python 3.12+: cProfile is process-wide there (sys.monitoring, PEP 669) and
keeps one call stack for all threads, and a second Profile cannot be
enabled while one is, so it cannot be run per thread. Instead this script
receives the same sys.monitoring events cProfile registers for
(Modules/_lsprof.c: PY_START/PY_RESUME/PY_THROW enter a Python function,
PY_RETURN/PY_YIELD/PY_UNWIND leave it, CALL/C_RETURN/C_RAISE of a built-in
function, or of a method descriptor bound to its first argument, enter and
leave a C function) and keeps cProfile's counts with one stack per thread:
ncalls, primitive calls (calls made while the function was not already
active on that thread), and the same per caller->callee edge. Functions are
keyed as cProfile keys them ((co_filename, co_firstlineno, co_name), or
("~", 0, label) for C functions). Only counts: the times are 0."""

import marshal
import runpy
import sys
import threading

out, target = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]


def run_per_thread_cprofile():
    import cProfile
    import pstats

    profiles = []
    original_run = threading.Thread.run

    def profiled_run(self):
        p = cProfile.Profile()
        profiles.append(p)
        p.runcall(original_run, self)

    threading.Thread.run = profiled_run
    main_profile = cProfile.Profile()
    main_profile.enable()
    try:
        runpy.run_path(target, run_name="__main__")
    finally:
        main_profile.disable()
        threading.Thread.run = original_run
    stats = pstats.Stats(main_profile)
    for p in profiles:
        stats.add(p)
    stats.dump_stats(out)


def c_label(cfunc):
    """cProfile's name of a built-in (_lsprof.c normalizeUserObj)."""
    owner, name, module = cfunc.__self__, cfunc.__name__, cfunc.__module__
    if owner is None:  # no m_self: "<len>", "<module.name>"
        if isinstance(module, str) and module != "builtins":
            return f"<{module}.{name}>"
        return f"<{name}>"
    for klass in type(owner).__mro__:  # a method of a type: repr of the type's attribute
        if name in vars(klass):
            return repr(vars(klass)[name])
    if isinstance(module, str):
        return f"<built-in method {module}.{name}>"
    return f"<built-in method {name}>"


def run_with_monitoring():
    mon = sys.monitoring
    E = mon.events
    tool = next(i for i in range(6) if mon.get_tool(i) is None)
    BuiltinType = type(len)
    DescrType = type(list.append)
    MISSING = mon.MISSING
    counts = {}   # key -> [calls, recursive calls]
    edges = {}    # (caller key, callee key) -> [calls, recursive calls]
    threads = {}  # thread ident -> (stack of (key, edge), active levels by key and edge)

    def state():
        ident = threading.get_ident()
        st = threads.get(ident)
        if st is None:
            st = threads[ident] = ([], {})
        return st

    def enter(key):
        stack, level = state()
        edge = (stack[-1][0], key) if stack else None
        level[key] = level.get(key, 0) + 1
        if edge is not None:
            level[edge] = level.get(edge, 0) + 1
        stack.append((key, edge))

    def leave():
        stack, level = state()
        if not stack:
            return  # a frame entered before monitoring began
        key, edge = stack.pop()
        for k, table in ((key, counts), (edge, edges)):
            if k is None:
                continue
            level[k] -= 1
            c = table.setdefault(k, [0, 0])
            c[0] += 1
            if level[k] > 0:
                c[1] += 1

    def cfunc_of(callable_, arg0):
        if isinstance(callable_, BuiltinType):
            return callable_
        if type(callable_) is DescrType and arg0 is not MISSING:
            meth = callable_.__get__(arg0, type(arg0))
            if isinstance(meth, BuiltinType):
                return meth
        return None

    def c_key(cfunc):
        return ("~", 0, c_label(cfunc))

    def py_start(code, offset, *rest):
        enter((code.co_filename, code.co_firstlineno, code.co_name))

    def py_leave(code, offset, *rest):
        leave()

    def c_call(code, offset, callable_, arg0):
        cfunc = cfunc_of(callable_, arg0)
        if cfunc is not None:
            enter(c_key(cfunc))

    def c_leave(code, offset, callable_, arg0):
        if cfunc_of(callable_, arg0) is not None:
            leave()

    mon.use_tool_id(tool, "cprofile_all_threads oracle")
    for event in (E.PY_START, E.PY_RESUME, E.PY_THROW):
        mon.register_callback(tool, event, py_start)
    for event in (E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND):
        mon.register_callback(tool, event, py_leave)
    mon.register_callback(tool, E.CALL, c_call)
    for event in (E.C_RETURN, E.C_RAISE):
        mon.register_callback(tool, event, c_leave)
    mon.set_events(tool, E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_RETURN | E.PY_YIELD | E.PY_UNWIND
                   | E.CALL | E.C_RETURN | E.C_RAISE)
    try:
        runpy.run_path(target, run_name="__main__")
    finally:
        mon.set_events(tool, 0)
        mon.free_tool_id(tool)
    stats = {}
    for key, (calls, recursive) in counts.items():
        stats[key] = (calls - recursive, calls, 0.0, 0.0, {})
    for (caller, callee), (calls, recursive) in edges.items():
        if callee in stats:
            stats[callee][4][caller] = (calls, calls - recursive, 0.0, 0.0)
    with open(out, "wb") as f:
        marshal.dump(stats, f)


if hasattr(sys, "monitoring"):
    run_with_monitoring()
else:
    run_per_thread_cprofile()
