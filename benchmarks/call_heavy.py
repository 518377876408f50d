"""Call-heavy microbenchmark: N calls of a trivial Python function.

Times three loops, alternately, --repeat times each, with time.perf_counter
(no interpreter start-up, no profiler set-up), and prints the fastest of each
(timeit's rule):

  * calls:  `acc = bump(acc)` N times, one Python call per iteration;
  * inline: `acc = acc + 1` N times, the same loop without the call. No
    call events, but on CPython 3.11 any profile hook switches the
    interpreter to its slower instrumented dispatch for every bytecode, so
    this shows the cost a tracer adds even where nothing is called;
  * ref:    sum(range(4 N)), C only, one call: unaffected by any Python-level
    profiler, it measures how fast this process runs at the moment.

    /usr/bin/python3 benchmarks/call_heavy.py [--calls N] [--repeat R]
    -> call_heavy: calls=2000000 elapsed_s=0.061234 inline_s=0.033882
       ref_s=0.041234 ns_per_call=30.6 repeat=5

A profiler's added cost per call is (t_profiled - t_plain) / calls. On a
shared machine whole processes run at full speed or markedly slower depending
on what shares their core; dividing by ref_s cancels that, so
benchmarks/overhead compares elapsed_s / ref_s between configurations and
converts back to ns with the fastest ref_s seen. It imports nothing heavy on
purpose.
"""
import argparse
import time


def bump(x):
    return x + 1


def call_loop(n):
    acc = 0
    for _ in range(n):
        acc = bump(acc)
    return acc


def inline_loop(n):
    acc = 0
    for _ in range(n):
        acc = acc + 1
    return acc


def ref_work(n):
    sum(range(4 * n))
    return n


def timed(fn, n):
    t0 = time.perf_counter()
    acc = fn(n)
    elapsed = time.perf_counter() - t0
    assert acc == n
    return elapsed


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    call_loop(1000)  # warm the specialising interpreter
    inline_loop(1000)
    calls, inline, ref = [], [], []
    for _ in range(max(1, args.repeat)):
        ref.append(timed(ref_work, args.calls))
        inline.append(timed(inline_loop, args.calls))
        calls.append(timed(call_loop, args.calls))
    elapsed = min(calls)
    print(f"call_heavy: calls={args.calls} elapsed_s={elapsed:.6f} "
          f"inline_s={min(inline):.6f} ref_s={min(ref):.6f} "
          f"ns_per_call={1e9 * elapsed / args.calls:.1f} "
          f"repeat={len(calls)}", flush=True)


if __name__ == "__main__":
    main()
