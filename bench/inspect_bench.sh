#!/bin/bash
# optstate inspect against Python torch.load on one large checkpoint, and the
# raw read speed of the disk for scale. Prints a Markdown table for BENCHMARKS.md.
#
# Usage: bench/inspect_bench.sh [--cold] OPTSTATE_BINARY CHECKPOINT [RUNS]
# Make a checkpoint first: /usr/bin/python3 bench/make_big_checkpoint.py /tmp/big.pt
# Each measurement is the median of RUNS (default 5) runs; wall time and peak RSS
# from GNU time. Default: warm page cache (one untimed read first). --cold drops
# the page cache before every run (root only): what a checkpoint fresh off a
# network filesystem or a cold disk costs.
set -euo pipefail
cold=0
if [ "${1:-}" = "--cold" ]; then cold=1; shift; fi
bin=$1 ckpt=$2 runs=${3:-5}
[ "$cold" = 1 ] || cat "$ckpt" > /dev/null  # warm the cache once, so all runs see the same state
measure() {  # prints "<median wall s> <median max RSS KiB>"
  local walls=() rss=()
  for _ in $(seq "$runs"); do
    if [ "$cold" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
    local out
    out=$( { /usr/bin/time -f "%e %M" "$@" > /dev/null; } 2>&1 | tail -n 1)
    walls+=("${out% *}")
    rss+=("${out#* }")
  done
  printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p" | tr '\n' ' '
  printf '%s\n' "${rss[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p"
}
size=$(stat -c %s "$ckpt")
echo "checkpoint: $ckpt, $(( size / 1048576 )) MiB; runs: $runs (median); $(nproc) cores; page cache: $([ "$cold" = 1 ] && echo cold || echo warm)"
echo
echo "| command | wall (s) | peak RSS (MiB) |"
echo "|---|---|---|"
row() { local name=$1; shift; read -r w r < <(measure "$@"); echo "| $name | $w | $(( r / 1024 )) |"; }
row "optstate inspect" "$bin" inspect "$ckpt"
row "optstate inspect --json" "$bin" inspect --json "$ckpt"
row "python torch.load (torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))" \
  /usr/bin/python3 -c "import sys, torch; torch.load(sys.argv[1])" "$ckpt"
row "cat FILE > /dev/null (page cache)" cat "$ckpt"
