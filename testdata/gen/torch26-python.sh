#!/bin/bash
# Run python3 with torch 2.6 inside the chroot made by torch26-chroot.sh.
#
# Usage: testdata/gen/torch26-python.sh [-C DIR] SCRIPT_OR_PYTHON_ARGS...
#   -C DIR  the host directory mounted read-write at /work and used as the working
#           directory (default: the repository root). Paths given to python must be
#           relative to it.
# Example: testdata/gen/torch26-python.sh -c 'import torch; print(torch.__version__)'
#
# If OPTSTATE_TORCH26_PYTHON names a python that already has torch 2.6 (say, a venv),
# it is used directly, without any chroot. Otherwise this needs root: every mount is
# made in a private mount namespace, so nothing is left mounted on the host when the
# command ends, however it ends. USE_LIBUV=0 because Debian's torch 2.6 lacks libuv,
# which torch.distributed's TCPStore otherwise asks for.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(cd "$here/../.." && pwd)
if [ "${1:-}" = "-C" ]; then work=$(cd "$2" && pwd); shift 2; fi

if [ -n "${OPTSTATE_TORCH26_PYTHON:-}" ]; then
  cd "$work"
  USE_LIBUV=${USE_LIBUV:-0} exec "$OPTSTATE_TORCH26_PYTHON" "$@"
fi

root=${OPTSTATE_TORCH26_ROOT:-/var/cache/optstate-torch26}
[ -x "$root/usr/bin/python3" ] || {
  echo "torch26-python: no torch 2.6 chroot at $root; run testdata/gen/torch26-chroot.sh" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "torch26-python: needs root for chroot" >&2; exit 1; }

exec unshare --mount --propagation private /bin/bash -c '
set -e
root=$1 work=$2; shift 2
mkdir -p "$root/work" "$root/dev/shm"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
mount --bind "$work" "$root/work"
exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  USE_LIBUV=0 PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 \
  /bin/sh -c "cd /work && exec python3 \"\$@\"" python3 "$@"
' torch26-python "$root" "$work" "$@"
