#!/bin/bash
# The Debian packages as a user meets them: `cpack -G DEB` from a build, the
# optstate package installed with apt into a clean bookworm chroot (mmdebstrap,
# minbase) so that its declared Depends are all it gets, then `optstate
# --version` and a validate run there, and its man pages and completion present.
# Needs root and the Debian mirror: without them it says so and skips, except
# under CI=true, where it fails.
# Usage: tests/api/check_deb.sh BUILD_DIR   (from the repository root)
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(pwd)
skip() {
  echo "SKIPPED: $*"
  [ "${CI:-}" = true ] && { echo "FAIL under CI=true: the package must be checked"; exit 1; }
  exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, chroot)"
command -v mmdebstrap > /dev/null || skip "mmdebstrap is not installed (bash .ci/install-deps --tests)"
source testdata/gen/debian-mirror.sh
mirror=$(debian_mirror) || skip "no Debian mirror in the apt sources; set OPTSTATE_DEBIAN_MIRROR"
tmp=$(mktemp -d /var/tmp/optstate-deb.XXXXXX)
trap 'rm -rf --one-file-system "$tmp"' EXIT
fail() { echo "FAIL $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/packages" > "$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$tmp"/packages/optstate_*_amd64.deb)
echo "ok   cpack: $(cd "$tmp/packages" && ls ./*.deb | tr '\n' ' ')"
dpkg-deb -f "$deb" Depends | grep -q libzstd1 || fail "$deb declares no libzstd1 dependency"

root=$tmp/root
mmdebstrap --mode=root --variant=minbase --quiet bookworm "$root" "deb $mirror bookworm main" \
  > "$tmp/mmdebstrap.log" 2>&1 || { cat "$tmp/mmdebstrap.log"; fail "mmdebstrap bookworm"; }
cp "$deb" "$root/tmp/"
cp testdata/good/torch113/adamw_index.pt "$root/tmp/checkpoint.pt"
# The chroot's own mounts live in this unshared namespace and vanish with it.
unshare --mount --propagation private bash -c '
  set -e
  mount -t proc proc "$1/proc"
  exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 sh -c "
    set -e
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/$(basename "$2") > /tmp/apt.log 2>&1 ||
      { cat /tmp/apt.log; exit 1; }
    optstate --version
    optstate validate /tmp/checkpoint.pt
    ls /usr/share/man/man1/optstate.1 /usr/share/man/man1/optstate-validate.1 /usr/share/bash-completion/completions/optstate
  "' sh "$root" "$deb" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "installing or running the package in a clean bookworm"; }
cat "$tmp/run.log"
grep -q "^optstate 0\.2\.0" "$tmp/run.log" || fail "optstate --version in the chroot"
grep -q "/tmp/checkpoint.pt: passed" "$tmp/run.log" || fail "validate in the chroot"
echo "ok   the optstate package installs into a clean bookworm and runs"
