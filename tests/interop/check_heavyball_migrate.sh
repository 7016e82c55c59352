#!/bin/bash
# optstate migrate --to heavyball3 on real HeavyBall 0.12.1, 0.21.8, 0.24.4, 1.4.0, 1.6.3 and 2.3.1
# AdamW and SOAP files
# (testdata/heavyball/migrate/0.24.4), checked by torch 2.6 against the layout real
# HeavyBall 3.2.0 saved for the same model (migrate/3.2.0) and the legacy values
# (check_heavyball_migrate.py). Resuming in HeavyBall 3.x itself needs HeavyBall and runs
# by hand (testdata/gen/resume_heavyball3.py; figures in migrate/resume.json).
# Usage: tests/interop/check_heavyball_migrate.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" heavyball-migrate
mkdir -p "$scratch/0.12.1" "$scratch/0.21.8" "$scratch/0.24.4" "$scratch/1.4.0" "$scratch/1.6.3" "$scratch/2.3.1"
# 0.21.8: (data_ptr, shape) keys like 0.24.4 (foreach=False saved k = 0: --steps).
for case in adamw_foreach adamw_perparam soap; do
  d=testdata/heavyball/migrate/0.21.8/$case
  steps=()
  [ "$case" = adamw_perparam ] && steps=(--steps 3)
  "$bin" migrate "$d/optim.pt" --manifest "$d/manifest.json" "${steps[@]}" -o "$scratch/0.21.8/$case.pt" > /dev/null ||
    { echo "FAIL migrate 0.21.8 $case"; exit 1; }
done
# 1.6.3: index keys with 1.x's names and step (SOAP with merge_dims=False: its default cannot save;
# the groups keep no precondition_frequency, so migrate takes HeavyBall's default 2 and says so).
for case in adamw_foreach adamw_perparam soap; do
  d=testdata/heavyball/migrate/1.6.3/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$scratch/1.6.3/$case.pt" > /dev/null ||
    { echo "FAIL migrate 1.6.3 $case"; exit 1; }
done
# 0.12.1: bare data_ptr keys, through the manifest.
for case in adamw soap soap_split; do
  d=testdata/heavyball/migrate/0.12.1/$case
  "$bin" migrate "$d/optim.pt" --manifest "$d/manifest.json" -o "$scratch/0.12.1/$case.pt" > /dev/null ||
    { echo "FAIL migrate 0.12.1 $case"; exit 1; }
done
# 1.4.0 saved the optimizer alone: its (Parameter, 0) keys are copies, matched by their bytes
# against the model saved at the same step.
for case in adamw_foreach adamw_perparam soap; do
  d=testdata/heavyball/migrate/1.4.0/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$scratch/1.4.0/$case.pt" > /dev/null ||
    { echo "FAIL migrate 1.4.0 $case"; exit 1; }
done
# 2.3.1: index keys, nested per view, the class pickled in the groups; SOAP without 3.x's batch dim.
for case in adamw_foreach adamw_perparam soap soap_split; do
  d=testdata/heavyball/migrate/2.3.1/$case
  "$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$scratch/2.3.1/$case.pt" > /dev/null ||
    { echo "FAIL migrate 2.3.1 $case"; exit 1; }
done
src=testdata/heavyball/migrate/0.24.4
"$bin" migrate "$src/adamw_foreach/optim.pt" --manifest "$src/adamw_foreach/manifest.json" \
  -o "$scratch/0.24.4/adamw_foreach.pt" > /dev/null || { echo "FAIL migrate adamw_foreach"; exit 1; }
# SOAP (foreach=False: per-parameter step) on Net and on ConvNet, whose conv weight is a merged view.
# soap_split: views numbered in HeavyBall's split order, not by address.
for case in soap soap_conv soap_split; do
  "$bin" migrate "$src/$case/optim.pt" --manifest "$src/$case/manifest.json" -o "$scratch/0.24.4/$case.pt" \
    > /dev/null || { echo "FAIL migrate $case"; exit 1; }
done
# verify does not replay SOAP: a SOAP file is refused as a whole (exit 2), never called clean or broken.
msg=$("$bin" verify "$scratch/0.24.4/soap.pt" --manifest "$src/soap/manifest.json" 2>&1 >/dev/null)
[ $? = 2 ] && [[ "$msg" == *"SOAP state; verify replays torch.optim"*"so nothing was checked"* ]] ||
  { echo "FAIL verify of a SOAP file: expected exit 2 naming SOAP, got: $msg"; exit 1; }
# torch.optim has no SOAP: refused (exit 2), nothing written.
"$bin" migrate --to torch "$src/soap/optim.pt" --manifest "$src/soap/manifest.json" -o "$scratch/soap_torch.pt" \
  > /dev/null 2>&1
[ $? = 2 ] && [ ! -e "$scratch/soap_torch.pt" ] || { echo "FAIL migrate --to torch of SOAP: expected exit 2"; exit 1; }
# foreach=False saved k = 0: refused without --steps (exit 1, nothing written), then given.
"$bin" migrate "$src/adamw_perparam/optim.pt" --manifest "$src/adamw_perparam/manifest.json" \
  -o "$scratch/0.24.4/adamw_perparam.pt" > /dev/null 2>&1
[ $? = 1 ] && [ ! -e "$scratch/0.24.4/adamw_perparam.pt" ] || { echo "FAIL migrate without --steps: expected exit 1"; exit 1; }
"$bin" migrate "$src/adamw_perparam/optim.pt" --manifest "$src/adamw_perparam/manifest.json" --steps 3 \
  -o "$scratch/0.24.4/adamw_perparam.pt" > /dev/null || { echo "FAIL migrate adamw_perparam --steps 3"; exit 1; }
# State already in 3.x's layout: --to heavyball3 writes it unchanged (check_heavyball_migrate.py
# compares every value), --to torch converts AdamW (resumed below) and refuses SOAP.
mkdir -p "$scratch/3.2.0"
for case in adamw soap; do
  d=testdata/heavyball/migrate/3.2.0/$case
  out=$("$bin" migrate "$d/optim.pt" --model "$d/model.pt" -o "$scratch/3.2.0/$case.pt") ||
    { echo "FAIL migrate of a 3.x $case file: expected exit 0"; exit 1; }
  [[ "$out" == *"HeavyBall 3.x's own layout: written unchanged"* ]] ||
    { echo "FAIL migrate of a 3.x $case file does not say it was already 3.x's layout: $out"; exit 1; }
done
"$bin" migrate --to torch testdata/heavyball/migrate/3.2.0/soap/optim.pt \
  --model testdata/heavyball/migrate/3.2.0/soap/model.pt -o "$scratch/soap3_torch.pt" > /dev/null 2>&1
[ $? = 2 ] && [ ! -e "$scratch/soap3_torch.pt" ] || { echo "FAIL migrate --to torch of 3.x SOAP: expected exit 2"; exit 1; }
# verify checks state against the optimizer that will load it: the remapped 0.x file (keys
# fixed, no per-parameter step) is what torch.optim.AdamW fails on; the migrated one replays.
"$bin" remap "$src/adamw_foreach/optim.pt" --manifest "$src/adamw_foreach/manifest.json" -o "$scratch/remapped.pt" \
  > /dev/null || { echo "FAIL remap"; exit 1; }
"$bin" verify --json "$scratch/remapped.pt" --manifest "$src/adamw_foreach/manifest.json" > "$scratch/verify.json"
[ $? = 1 ] && [ "$(grep -c '"check": "no-step"' "$scratch/verify.json")" = 13 ] ||
  { echo "FAIL verify of the remapped 0.x file: expected exit 1 and 13 no-step findings"; exit 1; }
"$bin" verify "$scratch/0.24.4/adamw_foreach.pt" --model "$src/adamw_foreach/model.pt" > /dev/null ||
  { echo "FAIL verify of the migrated file: expected clean"; exit 1; }
# --to torch (torch.optim.AdamW's layout), resumed in torch 2.6 by check_heavyball_migrate.py.
mkdir -p "$scratch/torch"
"$bin" migrate --to torch "$src/adamw_foreach/optim.pt" --manifest "$src/adamw_foreach/manifest.json" \
  -o "$scratch/torch/0.24.4.pt" > /dev/null || { echo "FAIL migrate --to torch 0.24.4"; exit 1; }
d=testdata/heavyball/migrate/1.4.0/adamw_foreach
"$bin" migrate --to torch "$d/optim.pt" --model "$d/model.pt" -o "$scratch/torch/1.4.0.pt" > /dev/null ||
  { echo "FAIL migrate --to torch 1.4.0"; exit 1; }
d=testdata/heavyball/migrate/0.12.1/adamw
"$bin" migrate --to torch "$d/optim.pt" --manifest "$d/manifest.json" -o "$scratch/torch/0.12.1.pt" > /dev/null ||
  { echo "FAIL migrate --to torch 0.12.1"; exit 1; }
d=testdata/heavyball/migrate/2.3.1/adamw_foreach
"$bin" migrate --to torch "$d/optim.pt" --model "$d/model.pt" -o "$scratch/torch/2.3.1.pt" > /dev/null ||
  { echo "FAIL migrate --to torch 2.3.1"; exit 1; }
d=testdata/heavyball/migrate/3.2.0/adamw
"$bin" migrate --to torch "$d/optim.pt" --model "$d/model.pt" -o "$scratch/torch/3.2.0.pt" > /dev/null ||
  { echo "FAIL migrate --to torch 3.2.0"; exit 1; }
"$bin" verify "$scratch/torch/0.24.4.pt" --manifest "$src/adamw_foreach/manifest.json" > /dev/null ||
  { echo "FAIL verify of the --to torch file: expected clean"; exit 1; }
echo "ok: migrate wrote the legacy AdamW and SOAP cases, refused k = 0 without --steps and SOAP into torch, carried 3.x files over unchanged;" \
  "verify tells them apart"
bash tests/interop/with_torch26.sh tests/interop/check_heavyball_migrate.py testdata/heavyball/migrate "$scratch"
