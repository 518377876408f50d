"""A multiprocessing Pool and a Process behind an `if __name__ == "__main__":`
guard; prints the results, as JSON. With "spawn" each child re-imports this
file as __mp_main__ (the guard keeps it from starting children of its own).
Usage: coexist_multiprocessing.py fork|spawn"""

import json
import multiprocessing as mp
import os
import sys

imported_as = __name__


def square(x):
    return x * x


def child_exit(code):
    sys.exit(code)


def main(method):
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        squares = pool.map(square, range(8))
        names = pool.apply(eval, ("__import__('__main__').imported_as",))
    p = ctx.Process(target=child_exit, args=(3,))
    p.start()
    p.join()
    return {"method": method, "squares": squares, "child_main": names, "exitcode": p.exitcode,
            "parent_pid_unchanged": os.getpid() == PID}


if __name__ == "__main__":
    PID = os.getpid()
    print(json.dumps(main(sys.argv[1])))
