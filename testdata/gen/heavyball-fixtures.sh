#!/bin/bash
# Fixtures from real HeavyBall runs (not part of regenerate.sh: CI cannot fetch).
#
# Usage: testdata/gen/heavyball-fixtures.sh HEAVYBALL_GIT_DIR
#   HEAVYBALL_GIT_DIR  a clone or mirror of github.com/HomebrewML/HeavyBall
# Extracts the versions it needs with `git archive` into the torch 2.6 chroot
# (outside this repository; HeavyBall's code is never committed here), runs the
# generators there, and replaces testdata/heavyball/ with what they wrote.
#   0.24.4 = commit 0ad271b (no tag; 19ee313 after it is 0.25.0)
#     gen_heavyball_fsdp2.py -> testdata/heavyball/fsdp2_0.24.4/
#     gen_heavyball_fsdp2_tp.py -> testdata/heavyball/fsdp2_tp_0.24.4/ (FSDP2 + TP, 4 ranks)
#     gen_heavyball_fsdp1.py -> testdata/heavyball/fsdp1_0.24.4/ (FSDP1, use_orig_params on and off)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/0.24.4/ (legacy AdamW and SOAP, saved + continued)
#   3.2.0 = tag v3.2.0
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/3.2.0/ (3.x's own layouts, the goldens)
#   1.4.0 = tag v1.4.0 (the last fake_groups release with a tag)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/1.4.0/ ((Parameter, i) keys, optimizer alone)
#     gen_heavyball_freeze.py -> testdata/heavyball/freeze_1.4.0/
#   0.12.1 = commit 75390f1 (no tag; state keyed by bare data_ptr)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/0.12.1/ (AdamW and SOAP)
#   1.6.3 = tag v1.6.3 (index keys, 1.x names; SOAP with merge_dims=False: its default cannot save)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/1.6.3/
#   0.21.8 = commit 8d8b5a6 (no tag; (data_ptr, shape) keys; torch.compile used directly, stubbed)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/0.21.8/
#   2.3.1 = tag v2.3.1 (index keys nested per view, the class pickled in the groups)
#     gen_heavyball_migrate.py -> testdata/heavyball/migrate/2.3.1/ (AdamW and SOAP)
set -euo pipefail
git_dir=${1:?usage: $0 HEAVYBALL_GIT_DIR}
. "$(dirname "$0")/library-source.sh"

extract() {  # extract COMMIT NAME -> path inside the chroot
  extract_source "$git_dir" "$1" "heavyball-$2" heavyball
}

stage=testdata/heavyball.new
rm -rf "$repo/$stage"
mkdir -p "$repo/$stage"
src=$(extract 0ad271b 0.24.4)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_fsdp2.py "$src" "$stage/fsdp2_0.24.4"
"$here/torch26-python.sh" testdata/gen/gen_heavyball_fsdp2_tp.py "$src" "$stage/fsdp2_tp_0.24.4"
"$here/torch26-python.sh" testdata/gen/gen_heavyball_fsdp1.py "$src" "$stage/fsdp1_0.24.4"
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 0.24.4 "$stage/migrate/0.24.4"
src=$(extract v3.2.0 3.2.0)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 3.2.0 "$stage/migrate/3.2.0"
src=$(extract v1.4.0 1.4.0)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_freeze.py "$src" "$stage/freeze_1.4.0"
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 1.4.0 "$stage/migrate/1.4.0"
src=$(extract 75390f1 0.12.1)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 0.12.1 "$stage/migrate/0.12.1"
src=$(extract v1.6.3 1.6.3)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 1.6.3 "$stage/migrate/1.6.3"
src=$(extract 8d8b5a6 0.21.8)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 0.21.8 "$stage/migrate/0.21.8"
src=$(extract v2.3.1 2.3.1)
"$here/torch26-python.sh" testdata/gen/gen_heavyball_migrate.py "$src" 2.3.1 "$stage/migrate/2.3.1"
rm -rf "$repo/testdata/heavyball"
mv "$repo/$stage" "$repo/testdata/heavyball"
du -sh "$repo/testdata/heavyball"
# The resume check needs HeavyBall 3.x, so it runs here and not in CI (heavyball-resume.sh).
if [ -n "${OPTSTATE:-}" ]; then
  "$here/heavyball-resume.sh" "$OPTSTATE"
fi
