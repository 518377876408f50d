#!/usr/bin/env bash
# Runs a command inside a Debian 13 (trixie) root: Python 3.13 and Debian's
# torch 2.x, the versions our users run but this machine (Debian 12, Python
# 3.11, torch 1.13) does not. `make test-trixie` builds and tests there.
#
#   scripts/trixie-env.sh COMMAND [ARGS...]     (as root; e.g. make -C /src build)
#
# The root is made once with debootstrap under build/trixie/root, from the
# Debian archive this machine's apt sources name, and reused. Inside it:
#   /src                  this working tree, read-write
#   /src/build            the host's build-trixie/ (so the Makefile, ./torchneck
#                         and the tests, which all use build/, use the trixie
#                         build, and the host's build/ is never touched)
#   /src/python/torchneck an overlay of the host's package: the trixie build's
#                         extension and bytecode land in build-trixie/python-ext,
#                         never in the host's source tree
#   /shared               ../shared, which tests reach as ROOT/../shared
# Everything runs in a private mount namespace, so the mounts are never seen
# by the host and vanish with it even if this script is killed; a trap also
# unmounts them on every exit path.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # debootstrap, chroot: root tools a user's PATH may lack
repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
# TORCHNECK_TRIXIE_STATE: another tree's build/trixie, to share one root
# between git worktrees (the root holds no state of the tree that made it).
state="${TORCHNECK_TRIXIE_STATE:-$repo/build/trixie}"
dir="$state/root"
base_done="$state/base-done"      # debootstrap finished
complete="$state/complete"        # every package below is in
tbuild="$repo/build-trixie"
# What a Debian 12 machine has that minbase lacks and the tests use, beyond
# scripts/ensure-deps.sh's list (which is installed inside as it is on the host).
# `pip install .` of the package (tests/python/test_pip_install.py) needs
# venv, pip and the CMake build backend, which Debian 12 does not package.
# torch.compile's inductor builds its CPU kernels through
# torch.utils.cpp_extension, which imports setuptools (tests/python/test_compile.py).
EXTRA_PKGS="ca-certificates procps python3-venv python3-pip python3-scikit-build-core python3-setuptools"

if [ $# -eq 0 ]; then
  echo "usage: scripts/trixie-env.sh COMMAND [ARGS...]" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  echo "trixie-env: debootstrap, chroot and mount need root; run it as root" >&2
  exit 1
fi
if [ -z "${TORCHNECK_TRIXIE_NS:-}" ]; then
  TORCHNECK_TRIXIE_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null || true
  done
  mounted=()
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

mounts_below() {  # mount points at or under $1, from this namespace's table
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo
}

make_base() {
  if [ -e "$dir" ]; then
    if [ -n "$(mounts_below "$dir")" ]; then
      echo "trixie-env: $dir is half made and still has mounts under it; unmount them first" >&2
      exit 1
    fi
    echo "trixie-env: $dir is half made (an interrupted run); making it again" >&2
    rm -rf --one-file-system "$dir"
  fi
  command -v debootstrap >/dev/null || { echo "trixie-env: debootstrap is missing (scripts/ensure-deps.sh installs it)" >&2; exit 1; }
  local uri
  uri="$("$repo/scripts/debian-archive-uri.sh")"
  if [ -z "$uri" ]; then
    echo "trixie-env: no Debian archive in this machine's apt sources" >&2
    exit 1
  fi
  mkdir -p "$state"
  echo "trixie-env: debootstrap trixie from $uri into $dir" >&2
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    trixie "$dir" "$uri" >"$state/debootstrap.log" 2>&1 ||
    { echo "trixie-env: debootstrap failed; see $state/debootstrap.log" >&2; exit 1; }
  # Name resolution for localhost (gloo, torchrun) and the archive.
  cp /etc/hosts "$dir/etc/hosts"
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  touch "$base_done"
}

mount_all() {
  mount -t proc proc "$dir/proc"; mounted+=("$dir/proc")
  mount --rbind /sys "$dir/sys"; mounted+=("$dir/sys")
  mount --rbind /dev "$dir/dev"; mounted+=("$dir/dev")   # with /dev/pts, /dev/shm (DataLoader workers, Chromium)
  mkdir -p "$dir/src" "$dir/shared" "$tbuild/python-ext/upper" "$tbuild/python-ext/work"
  mount --bind "$repo" "$dir/src"; mounted+=("$dir/src")
  mount --bind "$tbuild" "$dir/src/build"
  # A /tmp of this tree's own, so that two trees (git worktrees) testing in
  # one shared root at once never meet in its /tmp.
  mkdir -p "$tbuild/tmp" && chmod 1777 "$tbuild/tmp"
  mount --bind "$tbuild/tmp" "$dir/tmp"; mounted+=("$dir/tmp")
  mount -t overlay overlay \
    -o "lowerdir=$repo/python/torchneck,upperdir=$tbuild/python-ext/upper,workdir=$tbuild/python-ext/work" \
    "$dir/src/python/torchneck"
  if [ -d "$shared" ]; then
    mount --bind "$shared" "$dir/shared"; mounted+=("$dir/shared")
  fi
}

in_root() {  # a clean environment: nothing of the host's PATH, PYTHONPATH or make state
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS="-p no:cacheprovider" \
    chroot "$dir" "$@"
}

finish() {  # installs what is missing; a run cut short here is finished next time
  echo "trixie-env: installing the build's and tests' packages inside" >&2
  in_root sh -c "dpkg --configure -a && apt-get update -qq && \
    apt-get install -y -qq --no-install-recommends $EXTRA_PKGS >/dev/null && \
    /src/scripts/ensure-deps.sh && apt-get clean" >"$state/install.log" 2>&1 ||
    { echo "trixie-env: installing inside failed; see $state/install.log" >&2; exit 1; }
  stamp >"$complete"
}

stamp() {  # what the inside was installed from: the package lists, not file times
  { cat "$repo/scripts/ensure-deps.sh"; echo "$EXTRA_PKGS"; } | sha256sum | cut -d' ' -f1
}

mkdir -p "$state" "$tbuild"
# One maker of the root at a time: a run that finds another making it (make
# test starts that in the background) waits for it, then reuses the root.
exec 9>"$state/lock"
flock 9
[ -f "$base_done" ] && [ -d "$dir" ] || { rm -f "$complete" "$base_done"; make_base; }
mount_all
# Finished once; again when the package lists changed since (compared by
# content, so that a fresh checkout or a worktree sharing the root does not
# reinstall).
if [ ! -f "$complete" ] || [ "$(cat "$complete")" != "$(stamp)" ]; then
  finish
fi
exec 9>&-
# The machine's own trust store (it may hold a local proxy's CA), so that
# what reaches the network inside (npm ci for the browser tests) works as here.
cas=/etc/ssl/certs/ca-certificates.crt
if [ -f "$cas" ] && [ -f "$dir$cas" ]; then
  mount --bind -o ro "$cas" "$dir$cas"; mounted+=("$dir$cas")
fi
status=0
in_root "$@" || status=$?
exit $status
