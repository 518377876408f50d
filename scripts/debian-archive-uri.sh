#!/usr/bin/env bash
# Prints the Debian archive URI this machine's apt sources name (deb822
# .sources files first, then the one-line sources.list), or nothing when
# there is none. The archive is never written into the repository: the
# trixie root (trixie-env.sh) and the header check (check-compat.sh) take
# it from the machine they run on.
set -uo pipefail
uri="$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -1)"
if [ -z "$uri" ]; then
  uri="$(grep -h -E '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -1)"
fi
[ -n "$uri" ] && echo "$uri"
exit 0
