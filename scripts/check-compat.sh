#!/usr/bin/env bash
# Compiles the version-sensitive translation units against the versions our
# users run but this machine cannot: torch 2.x (Debian trixie's libtorch-dev)
# and Python 3.13 (libpython3.13-dev). Syntax-only: nothing is linked or run.
#
# The packages are fetched with `apt-get download` through a separate source
# list and state folder under build/compat; the system's own apt sources and
# state stay untouched. The archive is the one this machine's apt already
# uses, with the suite `trixie`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/build/compat"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"

# The Debian archive URI this machine is configured with (deb822 or one-line).
uri="$("$root/scripts/debian-archive-uri.sh")"
if [ -z "$uri" ]; then
  echo "check-compat: no Debian archive in this machine's apt sources; skipped" >&2
  exit 0
fi
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
pkgs="libtorch-dev libfmt-dev libpython3.13-dev"
if [ ! -f "$work/unpacked" ]; then
  apt-get "${apt_opts[@]}" -qq update
  (cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download $pkgs)
  for d in "$work"/debs/*.deb; do dpkg -x "$d" "$work/root"; done
  touch "$work/unpacked"
fi
inc="$work/root/usr/include"
pyinc="$(ls -d "$inc"/python3.13 | head -1)"
abi="-D_GLIBCXX_USE_CXX11_ABI=1"
status=0
check() {  # label, std, includes..., file
  local label="$1" std="$2"; shift 2
  if g++ -std="$std" -fsyntax-only $abi "$@" 2> "$work/err.txt"; then
    echo "compat: $label: ok"
  else
    echo "compat: $label: FAILED"; head -20 "$work/err.txt"; status=1
  fi
}
common=(-I"$root/include" -I"$root/src")
torch_version="$(ls "$work"/debs/libtorch-dev_* | sed 's/.*libtorch-dev_\([^+_]*\).*/\1/')"
for f in op_observer op_observer_collect; do
  check "$f.cc vs torch $torch_version" c++17 \
    -I"$inc" -I"$inc/torch/csrc/api/include" "${common[@]}" "$root/src/collect/torch/$f.cc"
done
for f in collect/python/tracer collect/python/sampler collect/python/py_names \
         collect/python/module_scopes collect/python/gc_pauses bindings/spiller; do
  check "$(basename "$f").cc vs Python 3.13" c++20 -I"$pyinc" -I"$inc" "${common[@]}" "$root/src/$f.cc"
done
exit $status
