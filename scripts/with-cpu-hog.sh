#!/bin/sh
# with-cpu-hog.sh COMMAND...: runs COMMAND while one busy loop per core
# (nproc of them, at the same priority) competes with it for every core, as
# other work does on a shared host; stops them after, and exits with
# COMMAND's status. The suite's timing tests must hold there too.
set -u
cores=$(nproc 2>/dev/null || echo 2)
hogs=""
i=0
while [ "$i" -lt "$cores" ]; do
  sh -c 'while :; do :; done' &
  hogs="$hogs $!"
  i=$((i + 1))
done
trap 'kill $hogs 2>/dev/null' EXIT INT TERM HUP
rc=0
"$@" || rc=$?
exit "$rc"
