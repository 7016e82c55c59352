#!/bin/bash
# optstate remap of every pointer-keyed fixture, checked by real torch 1.13 and
# 2.6 against the generator's truth (check_remapped.py). The collision fixture is
# remapped with each of --on-collision drop, share and reset; the default
# refusal is a golden CLI case.
# Usage: tests/interop/check_remap.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
bin=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
scratch=testdata/.remap-check
trap 'rm -rf "$scratch"' EXIT
rm -rf "$scratch"
for line in torch113 torch26; do
  mkdir -p "$scratch/$line"
  for name in heavyball_ptr_shape heavyball_bare_ptr ptr_shape_fp16 heavyball_param_view heavyball_fsdp_collision; do
    src=testdata/good/$line/$name
    extra=()
    out=$scratch/$line/$name.pt
    [ "$name" = heavyball_param_view ] && extra+=(--state-key optimizer)
    policies=(fail)
    [ "$name" = heavyball_fsdp_collision ] && policies=(drop share reset)
    for policy in "${policies[@]}"; do
      [ "$policy" = fail ] || out=$scratch/$line/$name.$policy.pt
      "$bin" remap "${extra[@]}" --on-collision "$policy" --manifest "$src.manifest.json" "$src.pt" -o "$out" \
        > /dev/null || { echo "FAIL remap $src ($policy)"; exit 1; }
    done
  done
done
echo "== torch 1.13"
/usr/bin/python3 tests/interop/check_remapped.py "$scratch" | grep -v '^ok'
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
echo "== torch 2.6"
bash tests/interop/with_torch26.sh tests/interop/check_remapped.py "$scratch" | grep -v '^ok'
exit "${PIPESTATUS[0]}"
