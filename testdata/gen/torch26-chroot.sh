#!/bin/bash
# Make sure a Debian trixie chroot with python3-torch 2.6 exists, for interop tests
# and the torch 2.6 fixtures. Bookworm's torch is 1.13, and behaviours we must match
# (weights_only=True by default, byteorder records, FSDP2 + DCP) only exist in 2.x.
#
# Usage: testdata/gen/torch26-chroot.sh [--rebuild] [--python-build]
#   build the chroot if it is missing, else check it; --rebuild builds it from scratch;
#   --python-build makes the other chroot, where tests/interop/check_python_trixie.sh
#   builds the Python package: the same plus trixie's compilers and build packages,
#   at /var/cache/optstate-trixie-build
# Env:   OPTSTATE_TORCH26_ROOT  where the chroot lives (default /var/cache/optstate-torch26)
#        OPTSTATE_TRIXIE_BUILD_ROOT the same for --python-build
#        OPTSTATE_DEBIAN_MIRROR mirror URL (default: the first Debian URI in the host's apt sources)
# Needs root and the Debian mirror; 3-4 minutes and 1.2 GB (1.6 GB with
# --python-build) on a 2-core machine, most of it downloading. The tree is assembled at
# ROOT.partial and renamed only once torch imports inside it, so an interrupted build
# never leaves something that looks usable. Runs for one ROOT take turns (ROOT.lock):
# tests/run-all.sh makes both chroots while it compiles, and a test that needs one
# while it is still being made waits for it instead of starting over.
set -euo pipefail

root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
extra=""
rebuild=0
for arg in "$@"; do
  case "$arg" in
    --rebuild) rebuild=1 ;;
    --python-build)
      root=${OPTSTATE_TRIXIE_BUILD_ROOT:-/var/cache/optstate-trixie-build}
      extra=,g++,cmake,make,pkg-config,python3-dev,python3-pip,python3-setuptools,pybind11-dev
      extra=$extra,nlohmann-json3-dev,libcli11-dev,libzstd-dev,python3-pytest,python3-jsonschema ;;
    *) echo "usage: $0 [--rebuild] [--python-build]" >&2; exit 2 ;;
  esac
done
say() { echo "torch26-chroot: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (mmdebstrap, chroot)"; exit 1; }
mkdir -p "$(dirname "$root")"
exec 9>> "$root.lock"
flock 9

torch_works() {
  [ -x "$1/usr/bin/python3" ] || return 1
  unshare --mount --propagation private sh -c '
    mount -t proc proc "$1/proc" || exit 1
    exec chroot "$1" /usr/bin/env -i PATH=/usr/bin:/bin LANG=C.UTF-8 \
      sh -c "command -v zstd >/dev/null && python3 -c \"import torch; print(\\\"torch\\\", torch.__version__)\""' sh "$1"
}

if [ -d "$root" ] && [ "$rebuild" = 0 ]; then
  if torch_works "$root" >&2 && { [ -z "$extra" ] || [ -x "$root/usr/bin/g++" ]; }; then exit 0; fi
  say "$root exists but torch, zstd or g++ is missing there; rebuilding"
fi

source "$(dirname "$0")/debian-mirror.sh"
mirror=$(debian_mirror) || true
[ -n "$mirror" ] || { say "no Debian mirror in the apt sources; set OPTSTATE_DEBIAN_MIRROR"; exit 1; }

if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq mmdebstrap >&2
fi

partial="$root.partial"
# Never rm -rf through a leftover bind mount into the host.
if findmnt -rn -o TARGET | grep "^$partial" > /dev/null; then
  say "something is still mounted below $partial; unmount it first"; exit 1
fi
rm -rf --one-file-system "$partial"
t0=$(date +%s)
say "mmdebstrap trixie from $mirror into $partial"
mmdebstrap --mode=root --variant=minbase --quiet \
  --include=python3-torch,python3-numpy,zstd$extra \
  --aptopt='APT::Install-Recommends "false"' \
  trixie "$partial" "deb $mirror trixie main" >&2
rm -f "$partial"/var/cache/apt/archives/*.deb
mkdir -p "$partial/work" "$partial/dev/shm"
torch_works "$partial" >&2 || { say "torch does not import in the new chroot"; exit 1; }
if findmnt -rn -o TARGET | grep "^$root" > /dev/null; then
  say "something is still mounted below $root; unmount it first"; exit 1
fi
rm -rf --one-file-system "$root"
mv "$partial" "$root"
say "ready in $(( $(date +%s) - t0 )) s: $root ($(du -sh --one-file-system "$root" | cut -f1))"
