#!/bin/bash
# The package installed as README.md says (pip install --no-build-isolation
# ./python), into a scratch target directory instead of the system, reusing
# BUILD_DIR's objects; then imported from outside the tree and run on a fixture.
# Usage: python/tests/check_install.sh PYTHON BUILD_DIR
set -euo pipefail
python=$1
build=$(readlink -f "$2")
repo=$(cd "$(dirname "$0")/../.." && pwd)
target=$(mktemp -d /tmp/optstate-pip.XXXXXX)
trap 'rm -rf "$target" "$repo/python/build" "$repo"/python/*.egg-info' EXIT
OPTSTATE_BUILD_DIR=$build "$python" -m pip install -q --no-build-isolation --no-deps --no-cache-dir \
  --target "$target" "$repo/python" 2>&1 | grep -v "Running pip as the 'root' user" || true
[ -f "$target/optstate/__init__.py" ] || { echo "FAIL: nothing installed in $target"; exit 1; }
ls "$target"/optstate/_native*.so > /dev/null || { echo "FAIL: no native module installed"; exit 1; }
cd /
PYTHONPATH=$target "$python" - "$repo/testdata/good/torch113/adamw_index.pt" <<'PY'
import sys
import optstate
report = optstate.validate(sys.argv[1])
assert optstate.__file__.startswith(sys.path[1]) or "optstate-pip" in optstate.__file__, optstate.__file__
assert report["passed"] is True, report
print(f"installed optstate {optstate.__version__} from {optstate.__file__}: validate passed")
PY
