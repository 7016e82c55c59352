#!/bin/bash
# validate --each over many checkpoints: -j 1 against -j N, beside a shell loop
# of one `optstate validate FILE` per checkpoint (what one did before --each).
# Prints a Markdown table for BENCHMARKS.md: median wall of RUNS runs, warm page
# cache; with --cold also one run each after dropping the page cache (root only).
#
# Usage: bench/validate_each_bench.sh [--cold] OPTSTATE_BINARY DIR [RUNS]
# Make DIR first: bench/make_checkpoint_zoo.sh DIR (200 checkpoints of 16-44 MB).
set -euo pipefail
cold=0
if [ "${1:-}" = "--cold" ]; then cold=1; shift; fi
bin=$1 dir=$2 runs=${3:-3}
cores=$(nproc)
files=$(find "$dir" -type f -name '*.pt' | sort)
count=$(echo "$files" | wc -l)
now() { date +%s%3N; }
median() { sort -n | sed -n "$(( (runs + 1) / 2 ))p"; }
time_of() {  # median wall ms of "$@" over RUNS runs
  for _ in $(seq "$runs"); do
    local t0; t0=$(now); "$@" > /dev/null || [ $? = 1 ]; echo $(( $(now) - t0 ))
  done | median
}
loop() { for f in $files; do "$bin" validate "$@" "$f" > /dev/null || [ $? = 1 ]; done; }
cat $files > /dev/null
echo "$count checkpoints, $(du -sh "$dir" | cut -f1); $cores cores; warm page cache; median of $runs runs"
echo
echo "| what | values read | one run per file (loop) | --each -j 1 | --each -j $cores | -j $cores vs -j 1 |"
echo "| --- | --- | --- | --- | --- | --- |"
for mode in values no-values; do
  flag=(); [ $mode = no-values ] && flag=(--no-values)
  l=$(time_of loop "${flag[@]}")
  j1=$(time_of "$bin" validate "${flag[@]}" --each -j 1 "$dir")
  jn=$(time_of "$bin" validate "${flag[@]}" --each -j "$cores" "$dir")
  printf '| validate | %s | %d ms | %d ms | %d ms | %s× |\n' "$([ $mode = values ] && echo yes || echo no)" \
    "$l" "$j1" "$jn" "$(awk -v a="$j1" -v b="$jn" 'BEGIN { printf "%.2f", a / b }')"
done
if [ $cold = 1 ]; then
  for j in 1 "$cores"; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(now); "$bin" validate --each -j "$j" "$dir" > /dev/null || true
    echo "cold page cache, --each -j $j: $(( $(now) - t0 )) ms"
  done
fi
