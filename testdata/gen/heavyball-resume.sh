#!/bin/bash
# The resume check of `optstate migrate` in real HeavyBall 3.2.0 (by hand only: CI cannot
# run HeavyBall). Migrates every legacy case of testdata/heavyball/migrate with OPTSTATE,
# resumes each in 3.2.0 (resume_heavyball3.py) and writes testdata/heavyball/migrate/resume.json.
# Usage: testdata/gen/heavyball-resume.sh OPTSTATE_BINARY
#   Needs HeavyBall 3.2.0 extracted at /var/tmp/heavyball-3.2.0 inside the torch 2.6 chroot
#   (heavyball-fixtures.sh does that).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$(readlink -f "${1:?usage: $0 OPTSTATE_BINARY}")
cd "$repo"
fixtures=testdata/heavyball/migrate
out=testdata/.heavyball-migrated
rm -rf "$out" && mkdir -p "$out/0.12.1" "$out/0.21.8" "$out/0.24.4" "$out/1.4.0" "$out/1.6.3" "$out/2.3.1"
for case in adamw soap soap_split; do  # bare data_ptr keys
  d=$fixtures/0.12.1/$case
  "$bin" migrate "$d/optim.pt" --manifest "$d/manifest.json" -o "$out/0.12.1/$case.pt" > /dev/null
done
trap 'rm -rf "$repo/$out"' EXIT
for vc in 0.21.8/adamw_foreach 0.21.8/adamw_perparam 0.21.8/soap 0.24.4/adamw_foreach 0.24.4/adamw_perparam \
          0.24.4/soap 0.24.4/soap_conv; do  # (0.24.4's soap_split diverges by itself)
  d=$fixtures/$vc
  steps=()
  [ "${vc#*/}" = adamw_perparam ] && steps=(--steps 3)  # foreach=False saved k = 0
  "$bin" migrate "$d/optim.pt" --manifest "$d/manifest.json" "${steps[@]}" -o "$out/$vc.pt" > /dev/null
done
for case in adamw_foreach adamw_perparam soap; do
  d=$fixtures/1.4.0/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$out/1.4.0/$case.pt" > /dev/null
done
for case in adamw_foreach adamw_perparam soap; do  # index keys, 1.x names (SOAP: merge_dims=False)
  d=$fixtures/1.6.3/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$out/1.6.3/$case.pt" > /dev/null
done
for case in adamw_foreach adamw_perparam soap soap_split; do
  d=$fixtures/2.3.1/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$out/2.3.1/$case.pt" > /dev/null
done
"$here/torch26-python.sh" testdata/gen/resume_heavyball3.py /var/tmp/heavyball-3.2.0 "$fixtures" "$out" \
  "$fixtures/resume.json"
