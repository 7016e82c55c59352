#!/bin/bash
# validate's targets, measured in pairs: each `optstate validate FILE` run
# follows a `cat FILE > /dev/null` of the same file (which also warms the page
# cache), and the ratio of their throughputs is taken per pair; single runs
# vary too much on this shared machine to compare across rounds.
#
# Usage: bench/validate_bench.sh [--cold] OPTSTATE_BINARY FILE [PAIRS=8]
#   FILE: a large checkpoint, e.g. src.pt from bench/dcp_bench.sh (3.2 GiB), or
#   one larger than the page cache can keep:
#   optstate regenerate --synthetic 5GiB -o big10.pt --no-sync   (9.9 GiB)
#   --cold: as root, drop the page cache before every run (cat and validate).
# Prints a Markdown table: medians, and throughput validate/cat per pair
# (target >= 0.90), plus --no-values wall (target <= 0.5 s) and peak RSS.
set -euo pipefail
cold=0
if [ "${1:-}" = --cold ]; then cold=1; shift; fi
bin=$(readlink -f "$1") file=$(readlink -f "$2") pairs=${3:-8}
[ -f "$file" ] || { echo "no file $file" >&2; exit 2; }
measure() {
  if [ "$cold" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  { /usr/bin/time -f '%e %M' "$@" > /dev/null; } 2>&1 | tail -n 1
}
cats=() full=() rss=() ratios=() novalues=()
for _ in $(seq "$pairs"); do
  c=$(measure sh -c "cat '$file' > /dev/null" | cut -d' ' -f1)
  set -- $(measure "$bin" validate "$file")
  v=$1 m=$2
  n=$(measure "$bin" validate --no-values "$file" | cut -d' ' -f1)
  cats+=("$c") full+=("$v") rss+=("$m") novalues+=("$n")
  ratios+=("$(echo "$c $v" | awk '{printf "%.3f", $1 / $2}')")
  echo "  cat $c s, validate $v s ($m KiB), --no-values $n s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{r[NR]=$1} END {printf "%.2f", (r[int((NR+1)/2)] + r[int(NR/2)+1]) / 2}'; }
range() { printf '%s\n' "$@" | sort -n | awk '{r[NR]=$1} END {printf "%.2f–%.2f", r[1], r[NR]}'; }
size=$(stat -c %s "$file")
echo "file: $file, $((size >> 20)) MiB; $pairs pairs; $(nproc) cores; page cache $([ "$cold" = 1 ] && echo "dropped before each run" || echo warm)"
echo
echo "| what | median | range |"
echo "|---|---|---|"
echo "| cat FILE > /dev/null (s) | $(median "${cats[@]}") | $(range "${cats[@]}") |"
echo "| optstate validate FILE (s) | $(median "${full[@]}") | $(range "${full[@]}") |"
echo "| throughput validate / cat, per pair (target ≥ 0.90) | $(median "${ratios[@]}") | $(range "${ratios[@]}") |"
echo "| optstate validate --no-values FILE (s, target ≤ 0.5) | $(median "${novalues[@]}") | $(range "${novalues[@]}") |"
echo "| validate peak RSS (MiB) | $(median $(printf '%s\n' "${rss[@]}" | awk '{print $1 / 1024}')) | |"
