#!/bin/sh
# trixie-build-wait.sh [COMMAND...]: waits for the background Debian 13 build
# of scripts/trixie-build-early.sh (its lock), raised to normal priority
# first so that it does not crawl beside other work, then runs COMMAND.
# Without a background build it runs COMMAND at once.
cd "$(dirname "$0")/.."
if [ -f build/trixie-build.pgid ]; then
  renice -n 0 -g "$(cat build/trixie-build.pgid)" >/dev/null 2>&1 || true
fi
exec flock build/trixie-build.lock "${@:-true}"
