#!/bin/sh
# with-cpu-hog.sh COMMAND...: runs COMMAND while one busy loop per core
# (nproc of them, at the same priority) competes with it for every core, as
# other work does on a shared host; stops them after, and exits with
# COMMAND's status. The suite's timing tests must hold there too. Inside a
# COMMAND that already runs beside them, it starts no more.
set -u
hogs=""
if [ -z "${TORCHNECK_CPU_HOG:-}" ]; then
  cores=$(nproc 2>/dev/null || echo 2)
  i=0
  while [ "$i" -lt "$cores" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
  done
fi
trap '[ -n "$hogs" ] && kill $hogs 2>/dev/null' EXIT INT TERM HUP
export TORCHNECK_CPU_HOG=1
rc=0
"$@" || rc=$?
exit "$rc"
