#!/bin/bash
# Regenerate every fixture under testdata/good/ from real PyTorch.
#
# Usage: testdata/gen/regenerate.sh [OUTDIR]
#   OUTDIR defaults to testdata/good (replaced only once everything succeeded).
#   torch 1.13 comes from Debian bookworm (/usr/bin/python3, apt python3-torch);
#   torch 2.6 from the trixie chroot that torch26-chroot.sh builds (root needed).
# Takes about 30 s once the chroot exists.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
final=${1:-testdata/good}
case "$final" in /*) ;; *) final="$repo/$final" ;; esac
stage="$final.new"
side=$(dirname "$final")  # testdata/: hostile/ and pickles/ are built beside good/
rm -rf "$stage"
mkdir -p "$stage"

echo "== torch 1.13 (Debian bookworm)"
/usr/bin/python3 testdata/gen/gen_fixtures.py "$stage/torch113"
/usr/bin/python3 testdata/gen/gen_adamw_parity.py "$stage/torch113"
/usr/bin/python3 testdata/gen/gen_optimizer_parity.py "$stage/torch113"
zstd -19 -q -f "$stage/torch113/adamw_index.pt" -o "$stage/torch113/adamw_index.pt.zst"
/usr/bin/python3 -c 'import sys; sys.path.insert(0, "testdata/gen"); import describe
describe.write_expected(sys.argv[1], "adamw_index.pt compressed with zstd -19")' \
  "$stage/torch113/adamw_index.pt.zst"

/usr/bin/python3 testdata/gen/gen_hostile.py "$side/hostile.new" > /dev/null
/usr/bin/python3 testdata/gen/gen_pickles.py "$side/pickles.new" > /dev/null
/usr/bin/python3 testdata/gen/gen_validate_fixtures.py "$side/validate.new" > /dev/null

echo "== torch 2.6 (Debian trixie chroot)"
testdata/gen/torch26-chroot.sh
# Inside the chroot the repository is /work, so paths must be relative to it.
rel=${stage#"$repo"/}
case "$rel" in /*) echo "OUTDIR must be inside the repository" >&2; exit 2 ;; esac
testdata/gen/torch26-python.sh testdata/gen/gen_fixtures.py "$rel/torch26"
testdata/gen/torch26-python.sh testdata/gen/gen_adamw_parity.py "$rel/torch26"
testdata/gen/torch26-python.sh testdata/gen/gen_optimizer_parity.py "$rel/torch26"
testdata/gen/torch26-python.sh testdata/gen/gen_dcp_fsdp2.py "$rel/torch26"
# Hostile DCP metadata, made from the new 2-rank checkpoint; its data-file
# symlinks point at testdata/good/torch26/fsdp2_dcp (valid once moved in place).
testdata/gen/torch26-python.sh testdata/gen/gen_hostile_dcp.py "$rel/torch26/fsdp2_dcp" \
    "${side#"$repo"/}/hostile.new/dcp" > /dev/null
testdata/gen/torch26-python.sh testdata/gen/gen_dcp_variants.py "$rel/torch26/fsdp2_dcp" \
    "${side#"$repo"/}/dcp_variants.new" > /dev/null

rm -rf "$final"
mv "$stage" "$final"
# testdata/hostile, pickles, dcp_variants and validate are replaced only with
# the default OUTDIR.
if [ "$final" = "$repo/testdata/good" ]; then
  for d in hostile pickles dcp_variants validate; do
    rm -rf "$repo/testdata/$d"
    mv "$side/$d.new" "$repo/testdata/$d"
  done
else
  rm -rf "$side/hostile.new" "$side/pickles.new" "$side/dcp_variants.new" "$side/validate.new"
fi
echo "fixtures in $final: $(du -sh "$final" | cut -f1)"
