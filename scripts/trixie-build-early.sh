#!/bin/sh
# `make test`'s Debian 13 build, started in the background as soon as Debian
# 12's build is done, at the lowest CPU priority (nice 19): it takes only the
# CPU time that Debian 12's tests leave idle, which the scheduler hands back
# to a test process the moment it wants a core. scripts/trixie-build-wait.sh
# raises it to normal priority and waits for it (the lock below): the
# quiet_machine test and test-trixie's own, then incremental, build call it.
# Output: build/trixie-build.log.
set -u
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
mkdir -p build
# A process group of its own (perl-base's setpgrp: Debian's essential perl),
# whose id trixie-build-wait.sh renices; not a session of its own (setsid): with
# autogroups, a new session is a scheduling group of its own, whose share of
# the CPU nice does not lower.
perl -e 'setpgrp(0, 0); exec @ARGV or die "$!\n"' sh -c '
  flock build/trixie-build.lock sh -c "scripts/trixie-env.sh true && nice -n 19 scripts/trixie-env.sh make -C /src -k build JOBS=$1"
  echo "exit $?"
  rm -f build/trixie-build.pgid' sh "$jobs" >build/trixie-build.log 2>&1 </dev/null &
echo $! >build/trixie-build.pgid
