#!/bin/bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes each one.
#
# Usage: tests/fuzz/run.sh [SECONDS_PER_TARGET=600] [TARGET[:RUNS]...]
#   Runs two targets at a time (one per core), each from the seeds cut from
#   testdata/ plus testdata/fuzz/<target>/, for SECONDS_PER_TARGET or until
#   RUNS executions, whichever comes first, then prints executions, coverage
#   and crashes per target. OPTSTATE_FUZZ_UNTIL=TIME (anything `date -d`
#   takes, e.g. 06:40) also ends every target by that time, so a long list
#   can be given a wall-clock budget: targets later in the list get what the
#   earlier ones leave. Crash inputs land in
#   build/fuzz/artifacts/<target>/; fix the bug, then copy the input into
#   testdata/fuzz/<target>/ so the fuzz_replay test keeps it fixed.
#   OPTSTATE_FUZZ_MERGE=1 also merges the grown corpus, minimised, into
#   testdata/fuzz/<target>/ (what is committed).
# Needs: apt-get install clang (Debian's clang 14 ships libFuzzer).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
seconds=${1:-600}
shift || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(pickle_vm zip_directory legacy zstd dcp_metadata inspect roundtrip inflate zero_dir)
targets=()
for spec in "${specs[@]}"; do targets+=("${spec%%:*}"); done
until_epoch=
[ -z "${OPTSTATE_FUZZ_UNTIL:-}" ] || until_epoch=$(date -d "$OPTSTATE_FUZZ_UNTIL" +%s)
out=build/fuzz
mkdir -p build  # the log sits beside the build directory
CC=clang CXX=clang++ cmake -S . -B "$out" -DOPTSTATE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out.log" 2>&1 ||
  { cat "$out.log"; exit 1; }
cmake --build "$out" -j"$(nproc)" > "$out.log" 2>&1 || { tail -50 "$out.log"; exit 1; }
/usr/bin/python3 tests/fuzz/make_seeds.py "$out/seeds" > /dev/null

fuzz_one() {
  local t=${1%%:*} runs=-1 corpus=$out/corpus/${1%%:*} budget=$seconds
  [ "$1" = "$t" ] || runs=${1#*:}
  if [ -n "$until_epoch" ]; then
    local left=$((until_epoch - $(date +%s)))
    [ "$left" -gt 0 ] || { echo "skipped: OPTSTATE_FUZZ_UNTIL passed" > "$out/$t.log"; return; }
    [ "$left" -ge "$budget" ] || budget=$left
  fi
  mkdir -p "$corpus" "$out/artifacts/$t" "testdata/fuzz/$t"
  # -max_len keeps mutations small (seeds up to 256 KiB are still run whole);
  # -rss_limit_mb bounds memory: exceeding it is reported as a crash.
  # ASan's default 256 MiB quarantine keeps every freed block out of reuse for
  # thousands of inputs, so each input faults in fresh pages: on a VM where a
  # page fault is slow that made the zstd target 2x slower. 16 MiB still holds
  # the blocks freed by the last few inputs.
  ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16} "$out/tests/fuzz/fuzz_$t" "$corpus" "$out/seeds/$t" "testdata/fuzz/$t" -max_total_time="$budget" -runs="$runs" \
      -max_len=16384 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$t/" > "$out/$t.log" 2>&1 || true
  if [ "${OPTSTATE_FUZZ_MERGE:-0}" = 1 ]; then
    # Keep only what adds coverage beyond the seeds (which the replay test cuts
    # from testdata/ anyway): merge into a copy of the seeds, then drop them.
    local merged=$out/merged/$t
    rm -rf "$merged" && mkdir -p "$merged" && cp "$out/seeds/$t"/* "$merged"/
    "$out/tests/fuzz/fuzz_$t" -merge=1 -max_len=16384 "$merged" "testdata/fuzz/$t" "$corpus" > "$out/$t.merge.log" 2>&1
    for f in "$out/seeds/$t"/*; do rm -f "$merged/$(basename "$f")"; done
    # At most 512 KiB per target is committed, smallest inputs first: the
    # repository stays small and the replay test fast.
    local total=0
    for f in $(ls -S -r "$merged"); do
      total=$((total + $(stat -c %s "$merged/$f")))
      [ "$total" -le $((512 << 10)) ] || rm -f "$merged/$f"
    done
    # Fixed crashes are kept under their own names whatever the merge thought of them.
    find "testdata/fuzz/$t" -name 'regression-*' -exec cp {} "$merged"/ \; 2>/dev/null || true
    rm -rf "testdata/fuzz/$t" && mv "$merged" "testdata/fuzz/$t"
  fi
}

running=0
for spec in "${specs[@]}"; do
  fuzz_one "$spec" &
  running=$((running + 1))
  if [ "$running" -ge "$(nproc)" ]; then wait -n; running=$((running - 1)); fi
done
wait

echo "| target | executions | exec/s | coverage (edges) | crashes, leaks, timeouts, OOMs |"
echo "|---|---|---|---|---|"
for t in "${targets[@]}"; do
  log=$out/$t.log
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'exec/s: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  crashes=$(find "$out/artifacts/$t" -type f | wc -l)
  echo "| $t | $runs | $rate | $cov | $crashes |"
done
