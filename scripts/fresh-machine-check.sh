#!/usr/bin/env bash
# Runs README's two set-up commands on a fresh, minimal Debian 12: a
# `debootstrap --variant=minbase bookworm` folder entered with chroot, with
# /proc, /sys, /dev, /dev/pts and /dev/shm bound, and a copy of this
# checkout (tracked and untracked-but-not-ignored files, no build folder) at
# the same absolute path as here. A package the install script forgets, or a
# test that leans on something only the development image has, fails here.
#
# Usage: scripts/fresh-machine-check.sh [--keep] [ROOT]
#   ROOT    scratch folder for the Debian tree (default /tmp/dsc-fresh-root;
#           created with debootstrap if it has no /etc/debian_version)
#   --keep  leave ROOT in place afterwards (default: removed)
# Environment: FRESH_COMMANDS overrides the commands run inside (default:
# README's two `bash scripts/...` lines, in order); FRESH_MIRROR the mirror.
# ccache's and pip's folders are shared with the chroot (a cache hit still
# needs every header the compile reads, so it hides no missing package). Needs root.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
root=${1:-/tmp/dsc-fresh-root}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
say() { echo "fresh-machine-check: $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "fresh-machine-check: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi
case "$root" in
/ | "") echo "fresh-machine-check: refusing ROOT '$root'" >&2; exit 2 ;;
esac

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -l "${mounted[$i]}" 2>/dev/null || true
  done
  # Only a tree this script made, and only once nothing is mounted in it.
  if [ "$keep" = 0 ] && [ -f "$root/.dsc-fresh-root" ] &&
     ! grep -q " $root[/ ]" /proc/mounts; then
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT

if [ ! -f "$root/etc/debian_version" ]; then
  if [ -e "$root" ] && [ -n "$(ls -A "$root" 2>/dev/null)" ]; then
    echo "fresh-machine-check: $root exists and is not a Debian tree" >&2
    exit 2
  fi
  command -v debootstrap >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq debootstrap; }
  say "debootstrap --variant=minbase bookworm $root"
  start=$(date +%s)
  mkdir -p "$root"
  touch "$root/.dsc-fresh-root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; exit 1; }
  rm -f "$root.log"
  say "base system in $(($(date +%s) - start)) s"
fi

bind() { # bind SOURCE TARGET-IN-ROOT
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mounted+=("$root$2")
}
# The tree itself first: `ip netns exec` (test/e2e/two_hosts.py) remounts
# "/" as a slave, which needs "/" to be a mount point inside the chroot.
mount --bind "$root" "$root"
mounted+=("$root")
bind /proc /proc
bind /sys /sys
bind /dev /dev
bind /dev/pts /dev/pts
bind /dev/shm /dev/shm
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The network's trust settings, as a machine on this network is set up: the
# host's own trust anchors (a TLS-inspecting proxy's CA, where there is one;
# update-ca-certificates in the tree keeps them) and pip's configuration.
# Without them pip cannot reach the Python index from inside.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -L /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
if [ -f /etc/pip.conf ]; then cp -L /etc/pip.conf "$root/etc/pip.conf"; fi
# What Debian's installer writes and debootstrap does not: without the
# host's own name here, every MPI start waits ~5 s on DNS
# (docs/multi-process.md).
if [ ! -f "$root/etc/hosts" ]; then
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$root/etc/hosts"
fi
ccache_dir=${CCACHE_DIR:-$HOME/.cache/ccache}
mkdir -p "$ccache_dir"
bind "$ccache_dir" /root/.cache/ccache
# pip's cache too: torch's wheels (scripts/install-python.sh) are ~4 GiB, and
# a cached wheel still installs every file the tests import.
pip_cache=$HOME/.cache/pip
mkdir -p "$pip_cache"
bind "$pip_cache" /root/.cache/pip

# The checkout, as git sees it: no build folder, nothing ignored.
say "copying $repo (git ls-files)"
rm -rf "${root:?}$repo"
mkdir -p "$root$repo"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$root$repo"
# Shared files the docs point at (../shared), when this checkout has them.
if [ -d "$repo/../shared" ]; then
  mkdir -p "$root$repo/../shared"
  cp -r "$repo/../shared/." "$root$repo/../shared/"
fi

if [ -n "${FRESH_COMMANDS:-}" ]; then
  commands=$FRESH_COMMANDS
else
  # README's set-up block: its `bash scripts/...` lines, in order.
  commands=$(awk '/^```sh/{inside=1; next} /^```/{if (inside) exit} inside && /^bash /' \
    "$repo/README.md" | paste -sd';' -)
  [ -n "$commands" ] ||
    { echo "fresh-machine-check: no commands in README.md's first sh block" >&2; exit 2; }
fi
say "inside: $commands"
start=$(date +%s)
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash -c "set -euo pipefail; cd '$repo'; $commands"
say "passed in $(($(date +%s) - start)) s"
