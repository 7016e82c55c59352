#!/bin/bash
# Paired A/B timing on this noisy shared disk: each optstate run is paired with
# a cp -r of the same input run just before it, and the median of the per-pair
# ratios is reported (a single run of either varies by 2x here).
#
# Usage: bench/dcp_pairs.sh OPTSTATE_BINARY DATADIR [PAIRS=8]
# DATADIR/dcp4 comes from bench/dcp_bench.sh. Synced optstate runs are paired
# with `cp -r && sync`, --no-sync runs with plain `cp -r`.
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2") pairs=${3:-8}
cd "$data"
[ -d dcp4 ] || { echo "no $data/dcp4: run bench/dcp_bench.sh first" >&2; exit 2; }
seconds() { { /usr/bin/time -f %e "$@" > /dev/null; } 2>&1 | tail -n 1; }
run() {  # label, baseline command, optstate arguments...
  local label=$1 base=$2; shift 2
  local ratios=() a b
  for _ in $(seq "$pairs"); do
    sync; a=$(seconds sh -c "$base"); rm -rf out; sync
    b=$(seconds "$bin" "$@"); rm -rf out out.pt
    ratios+=("$(echo "$b $a" | awk '{printf "%.3f", $1 / $2}')")
    echo "  $label: baseline $a s, optstate $b s" >&2
  done
  printf '%s\n' "${ratios[@]}" | sort -n | awk -v l="$label" -v n="$pairs" \
    '{r[NR]=$1} END {printf "| %s | %s | %.2f | %.2f–%.2f |\n", l, n, (r[int((NR+1)/2)] + r[int(NR/2)+1]) / 2, r[1], r[NR]}'
}
echo "| optstate / baseline | pairs | median ratio | range |"
echo "|---|---|---|---|"
run "consolidate vs cp -r && sync" "cp -r dcp4 out && sync" consolidate -q dcp4 -o out.pt
run "consolidate --no-sync vs cp -r" "cp -r dcp4 out" consolidate --no-sync -q dcp4 -o out.pt
run "reshard 4 -> 3 vs cp -r && sync" "cp -r dcp4 out && sync" reshard -q dcp4 -o out --world-size 3
run "reshard 4 -> 3 --no-sync vs cp -r" "cp -r dcp4 out" reshard --no-sync -q dcp4 -o out --world-size 3
