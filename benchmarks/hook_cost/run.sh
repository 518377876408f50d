#!/bin/sh
# The profile hook (what --python=trace uses) against sys.monitoring (PEP 669)
# callbacks on Python 3.12+, with the same bookkeeping as the tracer
# (monproto.cc), interleaved in one process, as ratios to a plain loop of
# the same round (docs/python-modes.md quotes the figures). Needs 3.12+, so
# from the repository root:
#   scripts/trixie-env.sh sh /src/benchmarks/hook_cost/run.sh [N] [ROUNDS]
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../src"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
py="${PYTHON:-python3}"
g++ -O2 -std=c++17 -shared -fPIC -I"$src" $("$py"-config --includes) "$here/monproto.cc" \
  -o "$out/monproto$("$py"-config --extension-suffix)"
PYTHONPATH="$out" "$py" "$here/bench_hooks.py" "$@"
