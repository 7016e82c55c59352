#!/bin/bash
# optstate.capture under real DDP, FSDP2 and FSDP1 (torch 2.6, 2 gloo processes):
# the manifests each rank writes hold what torch says of its parameters
# (capture_distributed.py), follow schemas/param-manifest.schema.json, and
# optstate's own reader takes them (regenerate --manifest). Fed to collisions
# with each rank's state keyed as HeavyBall 0.12-0.24 keyed it, optstate names
# exactly the parameters that shared each key in training; fed to remap, the
# FSDP1 files come back as torch.optim's own state dict, tensor for tensor.
# Usage: tests/interop/check_capture_distributed.sh OPTSTATE_BINARY
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" capture-distributed
bash tests/interop/with_torch26.sh tests/interop/capture_distributed.py python/optstate/capture.py "$scratch"
code=$?
[ $code = 0 ] || exit $code
/usr/bin/python3 - "$scratch" <<'PY' || exit 1
import glob, json, sys
import jsonschema
schema = json.load(open("schemas/param-manifest.schema.json"))
files = sorted(glob.glob(sys.argv[1] + "/*.rank*.json")) + [sys.argv[1] + "/ddp.job.json"]
assert len(files) == 9, files
for f in files:
    jsonschema.validate(json.load(open(f)), schema)
print(f"ok: {len(files)} manifests follow schemas/param-manifest.schema.json")
PY
for m in "$scratch"/*.rank*.json "$scratch/ddp.job.json"; do
  "$bin" regenerate --manifest "$m" --no-sync -q -o "$scratch/regenerated.pt" > /dev/null ||
    { echo "FAIL: optstate does not read $m"; exit 1; }
done
echo "ok: optstate reads every manifest (regenerate --manifest)"

# collisions: per rank and mode, the parameters optstate puts under each key are
# the ones that shared it in the live optimizer; exit 1 exactly when some did.
for mode in fsdp2 fsdp1_orig fsdp1_flat; do
  for rank in 0 1; do
    "$bin" collisions --json --manifest "$scratch/$mode.rank$rank.json" "$scratch/$mode.rank$rank.pt" \
      > "$scratch/collisions.json"
    code=$?
    /usr/bin/python3 - "$scratch/collisions.json" "$scratch/keys.$mode.$rank.json" "$code" "$mode.rank$rank" <<'PY' || exit 1
import json, sys
got = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
def text(key):
    shape = ", ".join(map(str, key[1])) + ("," if len(key[1]) == 1 else "")
    return f"({key[0]}, ({shape}))"
want = {text(k["key"]): sorted(k["params"]) for k in truth}
have = {k["key"]: sorted(k["params"]) for k in got["keys"]}
assert have == want, (sys.argv[4], have, want)
shared = any(len(p) > 1 for p in want.values())
assert int(sys.argv[3]) == (1 if shared else 0), (sys.argv[4], sys.argv[3])
assert [c["params"] for c in got["collisions"]] == [p for p in want.values() if len(p) > 1], got["collisions"]
PY
  done
done
echo "ok: collisions --manifest names the parameters that shared each pointer key in training (FSDP2, FSDP1 x2, 2 ranks)"

# remap: FSDP1's pointer-keyed state back to torch.optim's indices equals what
# torch.optim itself saved (torch 1.13 reads both).
for mode in fsdp1_orig fsdp1_flat; do
  for rank in 0 1; do
    "$bin" remap --no-sync --manifest "$scratch/$mode.rank$rank.json" "$scratch/$mode.rank$rank.pt" \
      -o "$scratch/remapped.pt" > /dev/null || { echo "FAIL: remap $mode.rank$rank"; exit 1; }
    /usr/bin/python3 - "$scratch/remapped.pt" "$scratch/$mode.rank$rank.index.pt" "$mode.rank$rank" <<'PY' || exit 1
import sys, torch
got, want = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert got["param_groups"] == want["param_groups"], sys.argv[3]
assert sorted(got["state"]) == sorted(want["state"]), (sys.argv[3], list(got["state"]), list(want["state"]))
for i, fields in want["state"].items():
    assert sorted(got["state"][i]) == sorted(fields), (sys.argv[3], i)
    for name, value in fields.items():
        assert torch.equal(got["state"][i][name], value), (sys.argv[3], i, name)
PY
  done
done
echo "ok: remap --manifest gives FSDP1's pointer-keyed state back as torch.optim saved it (2 modes, 2 ranks)"
