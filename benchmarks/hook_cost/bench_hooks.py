"""Per-call cost of the legacy profile hook vs sys.monitoring callbacks, same
bookkeeping (monproto), interleaved in one process; ratios to plain loops of
the same round. Usage: bench_hooks.py [N] [ROUNDS]"""
import statistics, sys, time
import cProfile
import monproto
_cp = [None]

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 11

def bump(x):
    return x + 1

def py_calls(n):          # one Python call per iteration
    acc = 0
    for _ in range(n):
        acc = bump(acc)
    return acc

def mixed_calls(n):       # one Python call and two C calls (builtin, method descriptor)
    acc = 0
    items = []
    for i in range(n):
        acc = bump(acc) + len(items)
        items.append(i)
        if len(items) > 64:
            items = []
    return acc

mon = sys.monitoring
E = mon.events
TOOL = 2

def mon_on():
    start, leave, call, creturn = monproto.mon_callbacks(mon.MISSING)
    mon.use_tool_id(TOOL, "monproto")
    for e in (E.PY_START, E.PY_RESUME, E.PY_THROW):
        mon.register_callback(TOOL, e, start)
    for e in (E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND):
        mon.register_callback(TOOL, e, leave)
    mon.register_callback(TOOL, E.CALL, call)
    for e in (E.C_RETURN, E.C_RAISE):
        mon.register_callback(TOOL, e, creturn)
    mon.set_events(TOOL, E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_RETURN | E.PY_YIELD
                   | E.PY_UNWIND | E.CALL | E.C_RETURN | E.C_RAISE)

def mon_off():
    mon.set_events(TOOL, 0)
    for e in (E.PY_START, E.PY_RESUME, E.PY_THROW, E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND, E.CALL,
              E.C_RETURN, E.C_RAISE):
        mon.register_callback(TOOL, e, None)
    mon.free_tool_id(TOOL)

CONFIGS = {"plain": (lambda: None, lambda: None),
           "legacy": (monproto.legacy_start, monproto.legacy_stop),
           "monitoring": (mon_on, mon_off),
           "cProfile": (lambda: (_cp.__setitem__(0, cProfile.Profile()), _cp[0].enable()),
                        lambda: _cp[0].disable())}

def timed(cfg, fn):
    on, off = CONFIGS[cfg]
    on()
    t0 = time.perf_counter()
    fn(N)
    t = time.perf_counter() - t0
    off()
    return t, monproto.total_calls() if cfg in ("legacy", "monitoring") else 0

for fn in (py_calls, mixed_calls):
    fn(1000)
    counts = {}
    ratios = {"legacy": [], "monitoring": [], "cProfile": []}
    ns = {"legacy": [], "monitoring": [], "cProfile": []}
    plain_t = []
    order = list(CONFIGS)
    for r in range(ROUNDS):
        times = {}
        for cfg in order[r % len(order):] + order[:r % len(order)]:
            times[cfg], counts[cfg] = timed(cfg, fn)
        plain_t.append(times["plain"])
        for cfg in ratios:
            ratios[cfg].append(times[cfg] / times["plain"])
            ns[cfg].append(1e9 * (times[cfg] - times["plain"]) / N)
    print(f"{fn.__name__}: N={N} rounds={ROUNDS} plain median {1e9 * statistics.median(plain_t) / N:.1f} ns/iter")
    for cfg in ratios:
        print(f"  {cfg:10s} ratio to plain median {statistics.median(ratios[cfg]):.2f} "
              f"(min {min(ratios[cfg]):.2f} max {max(ratios[cfg]):.2f}), added ns/iter median "
              f"{statistics.median(ns[cfg]):.1f}, calls counted {counts[cfg]}")
