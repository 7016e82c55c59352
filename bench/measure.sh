# Sourced by the benchmarks that compare commands side by side in one run.
#
#   measure NAME COMMAND...  runs COMMAND (output discarded) under /usr/bin/time
#                            after a `sync`, keeping its wall time and peak RSS
#                            under NAME; NAMEs are reported in the order first
#                            measured. Defined hooks run around it:
#                            before_measure (e.g. touching memory first) and
#                            after_measure (removing what the command wrote).
#   print_table [every]      the Markdown table of medians; with `every`, a
#                            column of every run's wall time as well.
# The caller sets `data`, a directory for the timing file.
declare -A wall rss
names=()

measure() {
  local name=$1
  shift
  [[ " ${names[*]} " == *" $name "* ]] || names+=("$name")
  sync
  if declare -F before_measure > /dev/null; then before_measure; fi
  /usr/bin/time -o "$data/time.txt" -f "%e %M" "$@" > /dev/null 2> "$data/stderr.txt" ||
    { echo "bench: '$name' failed:" >&2; cat "$data/stderr.txt" >&2; exit 1; }
  local r
  r=$(tail -n 1 "$data/time.txt")
  wall[$name]+="${r% *} "
  rss[$name]+="${r#* } "
  if declare -F after_measure > /dev/null; then after_measure; fi
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

print_table() {
  if [ "${1:-}" = every ]; then
    echo "| command | wall (s), median | wall (s), every run | peak RSS (MiB) |"
    echo "|---|---|---|---|"
  else
    echo "| command | wall (s) | peak RSS (MiB) |"
    echo "|---|---|---|"
  fi
  local name every
  for name in "${names[@]}"; do
    every=""
    [ "${1:-}" = every ] && every=" ${wall[$name]% } |"
    echo "| $name | $(echo "${wall[$name]}" | median) |$every $(( $(echo "${rss[$name]}" | median) / 1024 )) |"
  done
}
