#!/bin/bash
# The API example program (tests/api/optimizer_summary.cc, built against
# the public headers only) on fixtures: exact output and exit codes. Also checks
# that docs/library.md shows the program exactly as it is here.
# Usage: tests/api/check_example.sh BINARY   (from the repository root)
set -uo pipefail
bin=$1
failed=0
expect() {  # expect EXIT OUTPUT FILE
  local want_exit=$1 want=$2 file=$3 got exit
  got=$("$bin" "$file" 2>&1)
  exit=$?
  if [ "$exit" != "$want_exit" ] || [ "$got" != "$want" ]; then
    printf 'FAIL %s: exit %s, output:\n%s\nwanted exit %s, output:\n%s\n' "$file" "$exit" "$got" "$want_exit" "$want"
    failed=1
  else
    echo "ok   $file"
  fi
}
expect 0 "optimizer: 9 state entries keyed index, 9 parameters in 2 groups" testdata/good/torch113/combined.pt
expect 0 "(root): 17 state entries keyed ptr-shape, 9 parameters in 1 groups" testdata/good/torch113/heavyball_ptr_shape.pt
expect 0 "(root): 9 state entries keyed index, 9 parameters in 1 groups" testdata/good/torch113/adamw_index.pt.zst
expect 0 "" testdata/good/torch113/model_tied.pt
expect 2 "not found: testdata/no-such-file.pt: cannot open: No such file or directory" testdata/no-such-file.pt

if ! /usr/bin/python3 - <<'PY'
import sys
program = open("tests/api/optimizer_summary.cc").read()
readme = open("docs/library.md").read()
sys.exit(0 if "```cpp\n" + program + "```" in readme else 1)
PY
then
  echo "FAIL docs/library.md does not show tests/api/optimizer_summary.cc exactly (in a \`\`\`cpp block)"
  failed=1
else
  echo "ok   docs/library.md shows tests/api/optimizer_summary.cc as it is"
fi
exit "$failed"
