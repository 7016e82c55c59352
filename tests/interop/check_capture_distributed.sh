#!/bin/bash
# optstate.capture under real DDP and FSDP2 (torch 2.6, 2 gloo processes): the
# manifests each rank writes hold what torch says of its parameters
# (capture_distributed.py), follow schemas/param-manifest.schema.json, and
# optstate's own reader takes them (regenerate --manifest).
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
files = sorted(glob.glob(sys.argv[1] + "/*.rank*.json"))
assert len(files) == 4, files
for f in files:
    jsonschema.validate(json.load(open(f)), schema)
print(f"ok: {len(files)} manifests follow schemas/param-manifest.schema.json")
PY
for m in "$scratch"/*.rank*.json; do
  "$bin" regenerate --manifest "$m" --no-sync -q -o "$scratch/regenerated.pt" > /dev/null ||
    { echo "FAIL: optstate does not read $m"; exit 1; }
done
echo "ok: optstate reads every manifest (regenerate --manifest)"
