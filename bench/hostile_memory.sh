#!/bin/bash
# Peak memory and time of `optstate inspect` on every file of testdata/hostile
# (each must be refused or reported; none may run code or grow without bound).
# Usage: bench/hostile_memory.sh OPTSTATE_BINARY
set -euo pipefail
bin=$(readlink -f "$1")
cd "$(dirname "$0")/.."
echo "| input | size | exit | peak RSS (MiB) | wall (s) |"
echo "|---|---|---|---|---|"
for f in testdata/hostile/*; do
  [ -f "$f" ] || continue
  set +e
  /usr/bin/time -o /tmp/optstate-hostile-time -f '%M %e' "$bin" inspect "$f" > /dev/null 2>&1
  rc=$?
  set -e
  read -r kib secs < <(tail -n 1 /tmp/optstate-hostile-time)
  echo "| $(basename "$f") | $(stat -c %s "$f") B | $rc | $((kib / 1024)) | $secs |"
done
rm -f /tmp/optstate-hostile-time
