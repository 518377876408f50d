"""Call-heavy microbenchmark: N calls of a trivial Python function.

Prints its own elapsed time for the call loop (time.perf_counter, excluding
interpreter start-up and any profiler set-up), so a profiler's added cost per
Python call is (t_profiled - t_plain) / calls:

    /usr/bin/python3 benchmarks/call_heavy.py [--calls N]
    -> call_heavy: calls=2000000 elapsed_s=0.123456 ns_per_call=61.7

benchmarks/overhead runs it plain, under cProfile and under each torchneck
Python mode. It imports nothing heavy on purpose.
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2_000_000)
    args = p.parse_args(argv)
    call_loop(1000)  # warm the specialising interpreter
    t0 = time.perf_counter()
    acc = call_loop(args.calls)
    elapsed = time.perf_counter() - t0
    assert acc == args.calls
    print(f"call_heavy: calls={args.calls} elapsed_s={elapsed:.6f} "
          f"ns_per_call={1e9 * elapsed / args.calls:.1f}", flush=True)


if __name__ == "__main__":
    main()
