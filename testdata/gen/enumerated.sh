#!/bin/bash
# The enumerated corpus (testdata/gen/gen_enumerated_corpus.py) made by both torches,
# then judged by torch 2.6's default torch.load (judge_load.py).
#
# Usage: testdata/gen/enumerated.sh [OUTDIR]     OUTDIR inside the repository
#   (default testdata/enumerated, replaced only once both runs and the judge succeeded)
# torch 1.13 is the host's (/usr/bin/python3), torch 2.6 the trixie chroot's
# (torch26-python.sh: root). About 15 s, and 30 s more for FSDP1's rank files
# (gen_distributed_corpus.py; OPTSTATE_ENUM_NO_FSDP1=1 skips them, keeping those already there).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
final=${1:-testdata/enumerated}
case "$final" in /*) final=${final#"$repo"/} ;; esac
case "$final" in /*) echo "enumerated.sh: OUTDIR must be inside the repository" >&2; exit 2 ;; esac
stage="$final.new"
rm -rf "$stage"
/usr/bin/python3 -W ignore testdata/gen/gen_enumerated_corpus.py "$stage/torch113"
testdata/gen/torch26-python.sh -W ignore testdata/gen/gen_enumerated_corpus.py "$stage/torch26"
dirs=("$stage/torch113" "$stage/torch26")
# FSDP1 rank files: 2 gloo processes per layout (about 30 s); OPTSTATE_ENUM_NO_FSDP1=1 leaves them out.
if [ "${OPTSTATE_ENUM_NO_FSDP1:-}" != 1 ]; then
  testdata/gen/torch26-python.sh -W ignore testdata/gen/gen_distributed_corpus.py "$stage/distributed_torch26"
  dirs+=("$stage/distributed_torch26")
fi
testdata/gen/torch26-python.sh -W ignore testdata/gen/judge_load.py "${dirs[@]}"
if [ "${OPTSTATE_ENUM_NO_FSDP1:-}" = 1 ] && [ -d "$final/distributed_torch26" ]; then
  mv "$final/distributed_torch26" "$stage/"  # kept as it was
fi
rm -rf "$final"
mv "$stage" "$final"
