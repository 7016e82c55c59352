#!/bin/bash
# validate's targets, measured in pairs: each `optstate validate FILE` run
# follows a `cat FILE > /dev/null` of the same file (which also warms the page
# cache), and the ratio of their throughputs is taken per pair; single runs
# vary too much on this shared machine to compare across rounds.
#
# Usage: bench/validate_bench.sh OPTSTATE_BINARY FILE [PAIRS=8]
#   FILE: a large checkpoint, e.g. src.pt from bench/dcp_bench.sh (3.2 GiB).
# Prints a Markdown table: medians, and throughput validate/cat per pair
# (target >= 0.80), plus --no-values wall (target <= 0.5 s) and peak RSS.
set -euo pipefail
bin=$(readlink -f "$1") file=$(readlink -f "$2") pairs=${3:-8}
[ -f "$file" ] || { echo "no file $file" >&2; exit 2; }
measure() { { /usr/bin/time -f '%e %M' "$@" > /dev/null; } 2>&1 | tail -n 1; }
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
echo "file: $file, $((size >> 20)) MiB; $pairs pairs; $(nproc) cores"
echo
echo "| what | median | range |"
echo "|---|---|---|"
echo "| cat FILE > /dev/null (s) | $(median "${cats[@]}") | $(range "${cats[@]}") |"
echo "| optstate validate FILE (s) | $(median "${full[@]}") | $(range "${full[@]}") |"
echo "| throughput validate / cat, per pair (target ≥ 0.80) | $(median "${ratios[@]}") | $(range "${ratios[@]}") |"
echo "| optstate validate --no-values FILE (s, target ≤ 0.5) | $(median "${novalues[@]}") | $(range "${novalues[@]}") |"
echo "| validate peak RSS (MiB) | $(median $(printf '%s\n' "${rss[@]}" | awk '{print $1 / 1024}')) | |"
