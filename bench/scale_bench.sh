#!/bin/bash
# How optstate scales with the number of tensors, not their bytes (issue 21).
#
# Usage: bench/scale_bench.sh OPTSTATE_BINARY DATADIR [N...]
#   N: parameter counts (default 1000 10000 100000 1000000)
#   DCP_N=10000 DCP_RANKS="8 64": the DCP part (export of an N-parameter file
#   to each rank count, then every DCP command on it); DCP_N=0 skips it.
#
# For each N, `optstate regenerate` writes N parameters of shape [16, 8] with
# AdamW state keyed (data_ptr, shape) and the model in the same file (4 N zip
# records, ~30 N pickle objects), with a manifest of the pointers. Then inspect,
# validate, collisions, remap run on it, and torch 1.13's torch.load (Debian's
# /usr/bin/python3) of the same file, in one run so the rows compare. Each
# command runs once (10^6 takes minutes); a command that fails is shown with
# its exit code, never as a time. The DCP part compares export, inspect,
# validate, consolidate and reshard with torch 2.6's dcp_to_torch_save (in the
# chroot of testdata/gen/torch26-chroot.sh, when it exists).
#
# Writes DATADIR/scale.tsv, prints a Markdown table, and plots wall and peak
# RSS against N on log-log axes to DATADIR/scale.png with gnuplot (Debian's
# gnuplot-nox; skipped with a note when it is missing). PLOT_ONLY=1 measures
# nothing: it redraws the table and the plot from an existing DATADIR/scale.tsv.
set -euo pipefail
bin=$(readlink -f "$1") data=$(readlink -f "$2")
shift 2
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1000 10000 100000 1000000)
dcp_n=${DCP_N:-10000}
read -r -a dcp_ranks <<< "${DCP_RANKS:-8 64}"
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$data"
tsv="$data/scale.tsv"
if [ "${PLOT_ONLY:-0}" = 1 ]; then
  [ -f "$tsv" ] || { echo "PLOT_ONLY=1: no $tsv to plot" >&2; exit 2; }
  counts=() dcp_n=0
else
  printf "part\tn\tcommand\twall_s\trss_mib\texit\n" > "$tsv"
fi

# measure PART N NAME command...: one run, wall seconds and peak RSS (MiB).
measure() {
  local part=$1 n=$2 name=$3
  shift 3
  sync
  /usr/bin/time -o "$data/time.txt" -f "%e %M %x" "$@" > /dev/null 2> "$data/stderr.txt" || true
  local wall rss rc
  read -r wall rss rc < <(tail -n 1 "$data/time.txt")
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$part" "$n" "$name" "$wall" "$((rss / 1024))" "$rc" >> "$tsv"
  printf "  %-28s %8s s %7s MiB  exit %s\n" "$name" "$wall" "$((rss / 1024))" "$rc" >&2
}

manifest() {  # N -> a manifest of N [16, 8] float32 parameters on stdout
  python3 -c 'import json, sys
n = int(sys.argv[1])
json.dump({"format": "optstate-param-manifest", "version": 1,
           "params": [{"name": f"layers.{i}.w", "shape": [16, 8], "dtype": "float32"} for i in range(n)]},
          sys.stdout)' "$1"
}

for n in "${counts[@]}"; do
  f="$data/ptr$n.pt" m="$data/ptr$n.manifest.json"
  if [ ! -f "$f" ]; then
    manifest "$n" > "$data/in$n.json"
    "$bin" regenerate --manifest "$data/in$n.json" --key-scheme ptr-shape --with-model --manifest-out "$m" \
      -o "$f" --no-sync -q > /dev/null
  fi
  echo "N = $n: $f, $(( $(stat -c %s "$f") / 1048576 )) MiB" >&2
  cat "$f" > /dev/null  # warm: every row reads from the page cache
  measure file "$n" "optstate inspect" "$bin" inspect "$f"
  measure file "$n" "optstate validate" "$bin" validate "$f"
  measure file "$n" "optstate collisions" "$bin" collisions --manifest "$m" "$f"
  measure file "$n" "optstate remap --no-sync" "$bin" remap --manifest "$m" "$f" -o "$data/out.pt" --no-sync
  rm -f "$data/out.pt"
  measure file "$n" "torch.load (torch 1.13)" /usr/bin/python3 -c 'import sys, torch; torch.load(sys.argv[1])' "$f"
done

torch26="$repo/testdata/gen/torch26-python.sh"
have_torch26=false
if [ -x /var/cache/optstate-torch26/usr/bin/python3 ] || [ -n "${OPTSTATE_TORCH26_PYTHON:-}" ]; then have_torch26=true; fi
if [ "$dcp_n" != 0 ]; then
  src="$data/index$dcp_n.pt"
  if [ ! -f "$src" ]; then
    manifest "$dcp_n" > "$data/in$dcp_n.json"
    "$bin" regenerate --manifest "$data/in$dcp_n.json" --with-model -o "$src" --no-sync -q > /dev/null
  fi
  for ranks in "${dcp_ranks[@]}"; do
    d="$data/dcp$ranks"
    rm -rf "$d"
    echo "DCP: $dcp_n parameters on $ranks ranks" >&2
    measure "dcp$ranks" "$dcp_n" "optstate export --no-sync" "$bin" export "$src" -o "$d" --world-size "$ranks" --no-sync -q
    [ -f "$d/.metadata" ] || continue
    cat "$d"/* "$d/.metadata" > /dev/null
    measure "dcp$ranks" "$dcp_n" "optstate inspect" "$bin" inspect "$d"
    measure "dcp$ranks" "$dcp_n" "optstate validate" "$bin" validate "$d"
    measure "dcp$ranks" "$dcp_n" "optstate consolidate --no-sync" "$bin" consolidate "$d" -o "$data/out.pt" --no-sync -q
    rm -f "$data/out.pt"
    measure "dcp$ranks" "$dcp_n" "optstate reshard --no-sync" "$bin" reshard "$d" -o "$data/out" --world-size 4 --no-sync -q
    rm -rf "$data/out"
    if $have_torch26; then
      measure "dcp$ranks" "$dcp_n" "dcp_to_torch_save (torch 2.6)" "$torch26" -C "$data" -c \
        'import sys, warnings; warnings.filterwarnings("ignore")
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
dcp_to_torch_save(sys.argv[1], "out.pt")' "dcp$ranks"
      rm -f "$data/out.pt"
    fi
  done
fi

# The table, one row per (part, command), one column per N.
python3 - "$tsv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for part in dict.fromkeys(r["part"] for r in rows):
    sub = [r for r in rows if r["part"] == part]
    ns = list(dict.fromkeys(r["n"] for r in sub))
    label = "N parameters" if part == "file" else f"{part}: N parameters"
    print(f"\n| {label} | " + " | ".join(ns) + " |")
    print("|---|" + "---|" * len(ns))
    for cmd in dict.fromkeys(r["command"] for r in sub):
        cells = []
        for n in ns:
            r = next((r for r in sub if r["command"] == cmd and r["n"] == n), None)
            if r is None:
                cells.append("")
            elif r["exit"] not in ("0", "1"):  # 1: findings (validate, collisions), still a full run
                cells.append(f"failed (exit {r['exit']}), {r['wall_s']} s")
            else:
                cells.append(f"{r['wall_s']} s, {r['rss_mib']} MiB")
        print(f"| {cmd} | " + " | ".join(cells) + " |")
EOF

if command -v gnuplot > /dev/null; then
  walls=() rsss=() i=0
  for cmd in "optstate inspect" "optstate validate" "optstate collisions" "optstate remap --no-sync" \
             "torch.load (torch 1.13)"; do
    i=$((i + 1))
    awk -F'\t' -v c="$cmd" '$1 == "file" && $3 == c && ($6 == 0 || $6 == 1) {print $2, $4, $5}' "$tsv" \
      > "$data/plot-$i.dat"
    walls+=("'$data/plot-$i.dat' using 1:2 with linespoints title '$cmd'")
    rsss+=("'$data/plot-$i.dat' using 1:3 with linespoints title '$cmd'")
  done
  join() { local IFS=","; echo "$*"; }
  gnuplot <<EOF
set terminal pngcairo size 1200,500 noenhanced
set output "$data/scale.png"
set multiplot layout 1,2 title "optstate and torch.load by parameter count (4 tensors each, [16, 8]): slope 1 is linear"
set logscale xy
set key left top
set grid
set xlabel "parameters (N)"
set ylabel "wall (s)"
plot $(join "${walls[@]}")
set ylabel "peak RSS (MiB)"
plot $(join "${rsss[@]}")
unset multiplot
EOF
  echo "plot: $data/scale.png" >&2
else
  echo "no gnuplot (apt-get install gnuplot-nox): no plot" >&2
fi
