#!/bin/bash
# optstate remap against cp of the same file, and against the Python way
# (torch.load, rekey, torch.save). Prints a Markdown table for BENCHMARKS.md.
#
# Usage: bench/remap_bench.sh OPTSTATE_BINARY CHECKPOINT MANIFEST [RUNS]
# Make the inputs first: /usr/bin/python3 bench/make_big_checkpoint.py /tmp/bigptr.pt 3.2 --ptr-shape
# COMMAND=migrate measures `optstate migrate` (to HeavyBall 3.2's layout) in remap's place, on a
# legacy HeavyBall file: make_big_checkpoint.py /tmp/bighb.pt 3.2 \
#   --heavyball-like=testdata/heavyball/migrate/0.24.4/adamw_foreach/optim.pt (no Python row then).
# Runs alternate between the commands, with `sync` before each so no command
# pays for another's write-back; the input is in the page cache (warm); medians.
# optstate fsyncs its output before renaming it, plain cp does not, so
# `cp && sync` is shown too, and `remap --no-sync` (no fsync, like cp).
set -euo pipefail
bin=$1 ckpt=$2 manifest=$3 runs=${4:-3} command=${COMMAND:-remap}
out=$(dirname "$ckpt")/remap-bench.out.pt
cat "$ckpt" > /dev/null
declare -A wall rss
measure() {  # name, command...
  local name=$1; shift
  sync
  local r
  r=$( { /usr/bin/time -f "%e %M" "$@" > /dev/null; } 2>&1 | tail -n 1)
  wall[$name]+="${r% *} "
  rss[$name]+="${r#* } "
  rm -f "$out"
}
python_way=$(cat <<'PY'
import json, sys, torch
sd = torch.load(sys.argv[1])
params = json.load(open(sys.argv[2]))["params"]
index = {(p["data_ptr"], tuple(p["shape"])): i for i, p in enumerate(params)}
sd["state"] = {index[k]: v for k, v in sd["state"].items()}
torch.save(sd, sys.argv[3])
PY
)
for _ in $(seq "$runs"); do
  measure "cp" cp "$ckpt" "$out"
  measure "cp && sync" sh -c "cp '$ckpt' '$out' && sync"
  measure "optstate $command" "$bin" "$command" --manifest "$manifest" "$ckpt" -o "$out"
  measure "optstate $command --no-sync" "$bin" "$command" --no-sync --manifest "$manifest" "$ckpt" -o "$out"
done
rows=("cp" "cp && sync" "optstate $command" "optstate $command --no-sync")
if [ "$command" = remap ]; then
  measure "python: torch.load, rekey, torch.save" /usr/bin/python3 -c "$python_way" "$ckpt" "$manifest" "$out"
  rows+=("python: torch.load, rekey, torch.save")
fi
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "checkpoint: $ckpt, $(( $(stat -c %s "$ckpt") / 1048576 )) MiB, $(jq -r '.params | length' "$manifest" 2>/dev/null || echo '?') parameters; runs: $runs (median)$([ "$command" = remap ] && echo ", python once"); $(nproc) cores"
echo
echo "| command | wall (s) | peak RSS (MiB) |"
echo "|---|---|---|"
for name in "${rows[@]}"; do
  echo "| $name | $(echo "${wall[$name]}" | median) | $(( $(echo "${rss[$name]}" | median) / 1024 )) |"
done
