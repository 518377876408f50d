#!/usr/bin/env bash
# `make test-trixie`: the whole suite again (build, ctest, pytest) in the
# Debian 13 root of scripts/trixie-env.sh: Python 3.13, Debian's torch 2.x.
# Every phase runs even when an earlier one failed (the build with -k: what
# can be built is), so one run lists every failure; each phase is timed, as
# this run is part of CI's time. Exits non-zero when any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."
env=scripts/trixie-env.sh
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
summary=()
timed() {  # label, command...: runs it, records its time and exit status
  local label="$1" start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  summary+=("$label: $((SECONDS - start)) s, exit $rc")
  return $rc
}
timed "root (made or reused)" "$env" true || { echo "test-trixie: ${summary[*]}" >&2; exit 1; }
status=0
# `make test` started this build in the background at nice 19
# (scripts/trixie-build-early.sh): this build, incremental then, waits for it.
timed build scripts/trixie-build-wait.sh "$env" make -C /src -k build JOBS="$jobs" || status=1
timed ctest "$env" make -C /src test-cpp || status=1
# pytest directly, not `make test-python`: that reads build/python-path,
# which a failed build does not write, and the Python tests need only the
# extension and torchneck-analyze.
# The damaged-spill trials read the spill in C++ that does not depend on
# Python or torch; Debian 12's half ran 40 of them, here 10 more, seeded apart.
# The modules marked native_only (conftest.py: the native binaries and the
# sources alone) ran in Debian 12's half and are not run again here.
echo "test-trixie: not run again here (native_only, run in Debian 12's half):" \
  "$(grep -l '^pytestmark = pytest.mark.native_only' tests/python/test_*.py | xargs -n1 basename | tr '\n' ' ')" >&2
timed pytest "$env" sh -c 'cd /src && make browser-deps && TORCHNECK_SPILL_DAMAGE_COUNT=10 TORCHNECK_SPILL_DAMAGE_SEED=13 "$(scripts/find-python.sh)" -m pytest -q --durations=15 -m "not native_only" tests/python' ||
  status=1
for line in "${summary[@]}"; do echo "test-trixie: $line" >&2; done
exit $status
