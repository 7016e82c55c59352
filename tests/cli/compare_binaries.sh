#!/bin/bash
# For changes that promise no behaviour change (a refactor, a header moved):
# runs two optstate binaries on every fixture under testdata/ (files and DCP
# directories) with the read-only commands and the writing ones, and lists
# every case whose stdout, stderr, exit code or written bytes differ.
#   tests/cli/compare_binaries.sh OLD_BINARY NEW_BINARY
# Build the old one from a worktree of the base commit, e.g.
#   git worktree add /var/tmp/old BASE && cmake -S /var/tmp/old -B /var/tmp/old/build \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build /var/tmp/old/build --target optstate
# Exit 0 when all agree, 1 otherwise. Not part of .ci/run (it needs two builds).
set -uo pipefail
old=$(realpath "$1") new=$(realpath "$2")
cd "$(dirname "$0")/../.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
runs=0 diffs=0

differs() {  # differs DESCRIPTION: compares $scratch/o and $scratch/n
  runs=$((runs + 1))
  if ! diff -r "$scratch/o" "$scratch/n" > /dev/null; then
    echo "DIFF $1"
    diffs=$((diffs + 1))
  fi
}

run_both() {  # run_both ARGS...: each binary in its own directory, same relative names
  rm -rf "$scratch/o" "$scratch/n"
  mkdir -p "$scratch/o" "$scratch/n"
  for side in o n; do
    local bin=$old
    [ $side = n ] && bin=$new
    (cd "$scratch/$side" && "$bin" "$@" > stdout 2> stderr; echo $? > exit)
  done
}

# Help and usage errors: every subcommand's --help, and each run without arguments.
for cmd in "" $("$new" --help | awk '/^Subcommands:/ {on = 1; next} /^$/ {on = 0} on && /^  [a-z]/ {print $1}'); do
  # shellcheck disable=SC2086  # no command at all for ""
  run_both $cmd --help
  differs "$cmd --help"
  # shellcheck disable=SC2086
  run_both $cmd
  differs "$cmd (no arguments)"
done

inputs=$( (find testdata -type f \( -name '*.pt' -o -name '*.pth' -o -name '*.bin' -o -name '*.zst' \
             -o -name '*.safetensors' -o -name '*.pkl' \); find testdata -name .metadata -printf '%h\n') | sort -u)
for f in $inputs; do
  for cmd in "inspect" "inspect --json" "inspect --records" "validate" "validate --json" "collisions --json" \
             "verify --json"; do
    # shellcheck disable=SC2086  # the command's words
    run_both $cmd "$PWD/$f"
    differs "$cmd $f"
  done
  if [ -f "$f" ]; then
    for cmd in repack remap; do
      run_both $cmd "$PWD/$f" -o out.pt --no-sync
      differs "$cmd $f"
    done
  else
    run_both consolidate "$PWD/$f" -o out.pt
    differs "consolidate $f"
  fi
done
echo "$runs runs, $diffs differ"
[ "$diffs" = 0 ]
