#!/bin/bash
# optstate starts itself again with glibc.malloc.hugetlb=1 added to
# GLIBC_TUNABLES (tools/main.cc), and leaves a setting the user made alone.
# Observed in /proc/PID/environ while optstate waits to open a FIFO (no
# writer ever comes; SIGTERM ends it): that is the environment the running
# program image started with, so it shows the re-exec happened (same PID) and
# with what.
# Usage: tests/build/check_huge_page_heap.sh OPTSTATE_BINARY
set -euo pipefail
bin=$(readlink -f "$1")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

# GLIBC_TUNABLES as process PID started with. glibc, parsing it, writes a NUL
# over each ':' of the original (getenv sees a copy), so the tunables after
# the first follow as entries of their own there: joined again.
tunables_of() {
  tr '\0' '\n' < "/proc/$1/environ" | awk '
    /^GLIBC_TUNABLES=/ { v = substr($0, 16); on = 1; next }
    on && /^glibc\./ { v = v ":" $0; next }
    { on = 0 }
    END { print v }'
}

# expect LABEL WANTED_TUNABLES ENV_ARGS...: run inspect on a FIFO with that environment.
expect() {
  local label=$1 want=$2
  shift 2
  mkfifo "$scratch/fifo"
  env "$@" "$bin" inspect "$scratch/fifo" > "$scratch/out" 2>&1 &
  local pid=$! got="" i
  for i in $(seq 100); do  # up to 10 s for the exec to be done and open() to block
    got=$(tunables_of "$pid") || true
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  rm -f "$scratch/fifo"
  if [ "$got" != "$want" ]; then
    echo "FAIL $label: GLIBC_TUNABLES='$got', expected '$want'"
    failures=$((failures + 1))
  elif [ "$rc" = 0 ]; then
    echo "FAIL $label: exit 0 after SIGTERM: $(head -c 300 "$scratch/out")"
    failures=$((failures + 1))
  else
    echo "ok   $label: GLIBC_TUNABLES=$got"
  fi
}

expect "unset" "glibc.malloc.hugetlb=1" -u GLIBC_TUNABLES
expect "other tunables kept" "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1" GLIBC_TUNABLES=glibc.malloc.arena_max=2
expect "the user's choice stands" "glibc.malloc.hugetlb=0" GLIBC_TUNABLES=glibc.malloc.hugetlb=0
[ "$failures" = 0 ] || exit 1
