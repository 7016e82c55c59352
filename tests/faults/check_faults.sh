#!/bin/bash
# Faults: the output filesystem fills up, or the run is interrupted. Every
# writing command must then exit with an error (2, or 128 + signal), leave
# nothing at or beside the output path, and leave its input untouched.
#
# Usage: tests/faults/check_faults.sh OPTSTATE_BINARY
# Needs root for a small tmpfs (exit 77, skipped, where mount is not allowed).
set -euo pipefail
bin=$(readlink -f "$1")
work=$(mktemp -d /tmp/optstate-faults-XXXXXX)
full=$work/full
cleanup() { umount "$full" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$full"
if ! mount -t tmpfs -o size=2m optstate-faults "$full" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (needs root)"; exit 77
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Inputs larger than the 2 MiB filesystem, made by optstate itself.
"$bin" regenerate -q --synthetic 8MiB --steps 1 --with-model -o "$work/in.pt" > /dev/null
"$bin" export -q "$work/in.pt" -o "$work/in_dcp" --world-size 2 > /dev/null
# A rank set whose first output fits and whose second does not (1.2 MiB each).
mkdir -p "$work/ranks"
"$bin" regenerate -q --synthetic 400KiB --steps 1 --with-model -o "$work/ranks/rank0.pt" > /dev/null
cp "$work/ranks/rank0.pt" "$work/ranks/rank1.pt"
before=$(cd "$work" && find in.pt in_dcp ranks -type f -exec sha256sum {} + | sort)

# 1. No space left: exit 2, a message naming the cause, nothing left behind.
disk_full() {  # label, then the command's arguments (outputs go to $full)
  local label=$1 failed=$failures; shift
  set +e
  "$bin" "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$label: exit $rc, expected 2"
  grep -q "No space left on device" "$work/err.txt" || fail "$label: stderr does not say why: $(cat "$work/err.txt")"
  [ -z "$(ls -A "$full")" ] || fail "$label: left $(ls -A "$full")"
  rm -rf "${full:?}"/* "$full"/.[!.]* 2>/dev/null || true
  [ "$failures" != "$failed" ] || echo "ok   disk full: $label ($(head -c 160 "$work/err.txt"))"
}
disk_full "regenerate" regenerate -q --synthetic 8MiB --steps 1 -o "$full/out.pt"
disk_full "remap" remap "$work/in.pt" -o "$full/out.pt"
disk_full "remap --zstd" remap --zstd "$work/in.pt" -o "$full/out.pt.zst"
disk_full "remap rank set (second rank's output fails)" remap "$work/ranks/rank0.pt" "$work/ranks/rank1.pt" -o "$full"
disk_full "repack rank set (second rank's output fails)" repack "$work/ranks/rank0.pt" "$work/ranks/rank1.pt" -o "$full"
disk_full "repack" repack "$work/in.pt" -o "$full/out.pt"
disk_full "consolidate" consolidate -q "$work/in_dcp" -o "$full/out.pt"
disk_full "reshard" reshard -q "$work/in_dcp" -o "$full/out" --world-size 3
disk_full "export" export -q "$work/in.pt" -o "$full/out" --world-size 2

# 2. Interrupted (SIGINT, SIGTERM; SIGKILL for single files, whose temporary is
# unnamed): exit 128 + signal, nothing left behind.
umount "$full"
out=$work/out
mkdir -p "$out"
"$bin" regenerate -q --synthetic 1GiB --steps 1 --with-model -o "$work/big.pt" > /dev/null
interrupt() {  # label, signal, then the command's arguments (outputs go to $out)
  local label=$1 sig=$2 failed=$failures; shift 2
  "$bin" "$@" > /dev/null 2> "$work/err.txt" &
  local pid=$! started=0
  for _ in $(seq 200); do  # until it has its output open (unnamed files show as "$out/#123 (deleted)")
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "-> $out/"; then started=1; break; fi
    sleep 0.05
  done
  [ "$started" = 1 ] || fail "$label: no temporary output appeared to interrupt"
  kill "-$sig" "$pid" 2>/dev/null || fail "$label: finished before it could be interrupted"
  set +e
  wait "$pid"
  local rc=$?
  set -e
  local want=$((128 + $(kill -l "$sig")))
  [ "$rc" = "$want" ] || fail "$label: exit $rc after SIG$sig, expected $want"
  [ -z "$(ls -A "$out")" ] || fail "$label: SIG$sig left $(ls -A "$out")"
  rm -rf "${out:?}"/* "$out"/.[!.]* 2>/dev/null || true
  [ "$failures" != "$failed" ] || echo "ok   interrupted: $label (SIG$sig, exit $rc)"
}
interrupt "regenerate" INT regenerate -q --synthetic 2GiB --steps 1 -o "$out/out.pt"
interrupt "remap --zstd" TERM remap --zstd "$work/big.pt" -o "$out/out.pt.zst"
interrupt "export" INT export -q "$work/big.pt" -o "$out/dcp" --world-size 4
interrupt "regenerate" KILL regenerate -q --synthetic 2GiB --steps 1 -o "$out/out.pt"
interrupt "remap" KILL remap "$work/big.pt" -o "$out/out.pt"

# 3. A directory output killed outright: its staging directory stays (the output
# path itself never appears), and the next write to that output names it.
"$bin" export -q "$work/big.pt" -o "$out/dcp" --world-size 4 > /dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do
  ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "-> $out/" && break
  sleep 0.05
done
kill -KILL "$pid" 2>/dev/null || fail "export (SIGKILL): finished before it could be killed"
wait "$pid" 2>/dev/null || true
left=$(ls -A "$out")
[ ! -e "$out/dcp" ] || fail "export (SIGKILL): the output appeared"
case "$left" in .dcp.tmp-??????) ;; *) fail "export (SIGKILL): expected one staging directory, found '$left'" ;; esac
"$bin" export -q "$work/in.pt" -o "$out/dcp" --world-size 2 > /dev/null 2> "$work/err.txt"
grep -qF "note: $out/$left was left by an interrupted run writing $out/dcp; remove it" "$work/err.txt" ||
  fail "export after SIGKILL: no note about $left: $(cat "$work/err.txt")"
[ -d "$out/$left" ] || fail "export after SIGKILL: removed the leftover it should only report"
[ "$failures" != 0 ] || echo "ok   killed: export (SIGKILL) left $left, named by the next export"

after=$(cd "$work" && find in.pt in_dcp ranks -type f -exec sha256sum {} + | sort)
[ "$before" = "$after" ] || fail "an input changed"
[ "$failures" = 0 ] || { echo "$failures failures"; exit 1; }
echo "all fault cases passed; inputs unchanged"
