#!/usr/bin/env bash
# Installs what the build and tests need from Debian's packages, when run as
# root; otherwise prints the exact apt-get line and fails.
set -eu
PKGS="g++ make cmake python3 python3-dev python3-torch libtorch-dev pybind11-dev python3-pytest libgtest-dev nlohmann-json3-dev libsimdjson-dev zlib1g-dev libisal-dev clang libclang-rt-dev"
# report.html's browser tests: Debian's Chromium, driven from Node (tests/browser).
PKGS="$PKGS chromium"
# tests/python/test_pip_install.py: a fresh venv to pip install the package into.
PKGS="$PKGS python3-venv"
# The Debian 13 root of `make test-trixie` (scripts/trixie-env.sh).
PKGS="$PKGS debootstrap"
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "torchneck: missing Debian packages. Install them with:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "torchneck: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >&2
