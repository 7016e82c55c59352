#!/bin/bash
# Paired A/B of the fused AdamW step against torch 2.6's fused=True on this
# noisy machine: each round runs optstate's benchmark and torch's back to back
# and the per-round ratios (optstate / torch, best of STEPS steps each) are
# summarised, for 1 and 2 threads.
#
# Usage: bench/adamw_pairs.sh [MILLIONS=100] [STEPS=7] [ROUNDS=10] [ISA=avx2]
#   (ISA: which of optstate's variants to pair: generic, avx2 or avx512)
# Builds build/bench like bench/adamw_bench.sh; needs the torch 2.6 chroot.
set -euo pipefail
millions=${1:-100} steps=${2:-7} rounds=${3:-10} isa=${4:-avx2}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > /dev/null
cmake --build build/bench -j"$(nproc)" --target adamw_bench > /dev/null
ratios=$(mktemp)
trap 'rm -f "$ratios"' EXIT
for _ in $(seq "$rounds"); do
  ours=$(build/bench/bench/adamw_bench "$millions" "$steps" | grep "^| optstate fused AdamW, $isa |")
  theirs=$(testdata/gen/torch26-python.sh bench/adamw_torch_bench.py fused "$millions" "$steps" | grep fused)
  for t in 1 2; do
    o=$(echo "$ours" | awk -F'|' -v t="$t" '$3 + 0 == t {print $4 + 0}')
    f=$(echo "$theirs" | awk -F'|' -v t="$t" '$3 + 0 == t {print $4 + 0}')
    echo "$t $o $f" | tee -a "$ratios" >&2
  done
done
echo "| threads | rounds | optstate $isa median (s) | torch 2.6 fused median (s) | median ratio | rounds optstate faster |"
echo "|---|---|---|---|---|---|"
for t in 1 2; do
  awk -v t="$t" '$1 == t' "$ratios" | /usr/bin/python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split()[1:])) for l in sys.stdin if l.strip()]
o = [r[0] for r in rows]; f = [r[1] for r in rows]; q = [a / b for a, b in rows]
print(f"| {sys.argv[1]} | {len(rows)} | {statistics.median(o):.4f} | {statistics.median(f):.4f} | "
      f"{statistics.median(q):.3f} | {sum(x < 1 for x in q)} of {len(rows)} |")' "$t"
done
