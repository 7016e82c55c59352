#!/bin/bash
# AdamW step throughput: optstate's fused kernel next to a STREAM-like kernel
# with the same memory traffic, torch 1.13 foreach AdamW, torch 2.6 fused=True
# (trixie chroot), and LibTorch's torch::optim::AdamW, all on 100 float32
# tensors holding MILLIONS parameters in total, 1 and 2 threads.
#
# Usage: bench/adamw_bench.sh [MILLIONS=100] [STEPS=7] [ROUNDS=3]
# Builds build/bench (Release, with the LibTorch benchmark). The contenders run
# in turn, ROUNDS times; each row keeps the best time any round gave it, so slow
# moments of this shared machine hurt nobody in particular.
set -euo pipefail
millions=${1:-100} steps=${2:-7} rounds=${3:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DOPTSTATE_BENCH_LIBTORCH=ON -DBUILD_TESTING=OFF > /dev/null
cmake --build build/bench -j"$(nproc)" --target adamw_bench libtorch_adamw_bench > /dev/null
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for _ in $(seq "$rounds"); do
  build/bench/bench/adamw_bench "$millions" "$steps" | grep '^| [A-Za-z]' | grep -v '^| what' >> "$rows"
  /usr/bin/python3 bench/adamw_torch_bench.py foreach "$millions" "$steps" >> "$rows"
  build/bench/bench/libtorch_adamw_bench "$millions" "$steps" >> "$rows"
  if [ -x /var/cache/optstate-torch26/usr/bin/python3 ] || [ "$(id -u)" = 0 ]; then
    testdata/gen/torch26-python.sh bench/adamw_torch_bench.py fused "$millions" "$steps" >> "$rows"
  fi
done
echo "$millions M float32 parameters in 100 tensors; best of $steps steps, best of $rounds rounds; $(nproc) cores"
echo "28 bytes move per parameter and step (read param, grad, exp_avg, exp_avg_sq; write three back)"
echo
echo "| what | threads | seconds | GB/s | of STREAM-like (same threads) |"
echo "|---|---|---|---|---|"
# Best seconds per (what, threads); percentages against the best STREAM-like time.
awk -F'|' '
  { what=$2; gsub(/^ +| +$/, "", what); t=$3+0; s=$4+0
    key=what "|" t
    if (!(key in best) || s < best[key]) best[key]=s
    if (!(key in order)) { order[key]=++n; names[n]=key } }
  END {
    for (i=1; i<=n; i++) { split(names[i], k, "|"); if (k[1] ~ /^STREAM/) stream[k[2]]=best[names[i]] }
    for (i=1; i<=n; i++) {
      split(names[i], k, "|"); s=best[names[i]]
      printf "| %s | %s | %.4f | %.1f | %.0f%% |\n", k[1], k[2], s, 28e-3*'"$millions"'/s, 100*stream[k[2]]/s
    } }' "$rows" | sort -t'|' -k3,3n -k4,4n
