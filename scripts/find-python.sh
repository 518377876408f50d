#!/usr/bin/env bash
# Prints the Python interpreter to use: $PYTHON if set, else the first one
# that can import torch (Debian's /usr/bin/python3 before the first python3 on
# PATH, which may be another interpreter without torch).
set -u
if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; exit 0; fi
for p in /usr/bin/python3 "$(command -v python3 2>/dev/null)" /usr/local/bin/python3; do
  [ -n "$p" ] && [ -x "$p" ] || continue
  if "$p" -c 'import torch' >/dev/null 2>&1; then echo "$p"; exit 0; fi
done
# Nothing has torch yet: the one Debian's python3-torch installs into.
echo /usr/bin/python3
