"""A deterministic workload for comparing call counts with cProfile:
recursion (direct and mutual), a generator, built-ins, a class, and a thread
started while profiling runs."""

import sys
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def squares(n):
    for i in range(n):
        yield i * i


class Accumulator:
    def __init__(self):
        self.items = []

    def add(self, x):
        self.items.append(x)

    def total(self):
        return sum(self.items)


def in_thread(results):
    acc = Accumulator()
    for v in squares(50):
        acc.add(v)
    results.append(acc.total() + fib(12))


def main():
    results = []
    t = threading.Thread(target=in_thread, args=(results,))
    t.start()
    acc = Accumulator()
    for i in range(200):
        acc.add(len(str(i)))
    evens = sum(1 for i in range(30) if is_even(i))
    t.join()
    print(fib(16), evens, acc.total(), sum(squares(100)), results[0])


if __name__ == "__main__":
    main()
    sys.stdout.flush()
