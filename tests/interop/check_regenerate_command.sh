#!/bin/bash
# optstate regenerate, checked by real torch 1.13 and 2.6 (check_regenerate_command.py):
# the files load (2.6: weights_only=True), torch.optim.AdamW takes the state, and
# the broken layouts, once remapped, give back exactly the canonical state of
# the same seed.
# Usage: tests/interop/check_regenerate_command.sh OPTSTATE_BINARY. Skips like with_torch26.sh.
set -uo pipefail
. "$(dirname "$0")/check_setup.sh" "$1" regenerate
run() { "$bin" "$@" -q > /dev/null || { echo "FAIL optstate $*"; exit 1; }; }
quiet() { "$bin" "$@" > /dev/null || { echo "FAIL optstate $*"; exit 1; }; }
s=$scratch
run regenerate --synthetic 1MiB -o $s/plain.pt
run regenerate --synthetic 1MiB --with-model --amsgrad --steps 5 -o $s/model_amsgrad.pt
run regenerate --synthetic 1MiB --key-scheme fqn -o $s/fqn.pt
run regenerate --synthetic 1MiB --key-scheme ptr-shape --split-rows 64 --manifest-out $s/ptr.manifest.json -o $s/ptr.pt
quiet remap --manifest $s/ptr.manifest.json $s/ptr.pt -o $s/ptr.remapped.pt
# verify: a pointer-keyed file is cold everywhere (exit 1); remapped, it is clean.
# (Without split views: nested per-view state is not what torch.optim.AdamW runs.)
run regenerate --synthetic 1MiB --key-scheme ptr-shape --manifest-out $s/whole.manifest.json -o $s/whole.pt
"$bin" verify --manifest $s/whole.manifest.json $s/whole.pt > /dev/null
[ $? = 1 ] || { echo "FAIL verify of the ptr-shape file should exit 1"; exit 1; }
quiet remap --manifest $s/whole.manifest.json $s/whole.pt -o $s/whole.remapped.pt
quiet verify --manifest $s/whole.manifest.json $s/whole.remapped.pt
run regenerate --synthetic 1MiB --key-scheme string-index -o $s/str.pt
quiet remap --manifest $s/ptr.manifest.json $s/str.pt -o $s/str.remapped.pt
run regenerate --synthetic 1MiB --key-scheme ptr-shape-fsdp --with-model -o $s/fsdp.pt
# --model: its weights are the starting values (at lr=0 they come back unchanged).
run regenerate --model testdata/good/torch113/heavyball_tied_model.pt --lr 0 --with-model -o $s/model_lr0.pt
# The rest of the family, laid out as torch saves each class.
run regenerate --synthetic 1MiB --with-model --optimizer sgd --momentum 0.9 --nesterov --weight-decay 1e-4 -o $s/family_sgd.pt
run regenerate --synthetic 1MiB --with-model --optimizer sgd -o $s/family_sgd_plain.pt
run regenerate --synthetic 1MiB --with-model --optimizer adam --amsgrad --weight-decay 1e-2 -o $s/family_adam.pt
run regenerate --synthetic 1MiB --with-model --optimizer adagrad --lr-decay 1e-3 --initial-accumulator-value 0.1 \
  -o $s/family_adagrad.pt
run regenerate --synthetic 1MiB --with-model --optimizer rmsprop --centered --momentum 0.5 -o $s/family_rmsprop.pt
for f in sgd sgd_plain adam adagrad rmsprop; do quiet verify $s/family_$f.pt; done
"$bin" collisions $s/fsdp.pt > /dev/null
[ $? = 1 ] || { echo "FAIL collisions on the ptr-shape-fsdp file should exit 1"; exit 1; }
echo "== torch 1.13"
/usr/bin/python3 tests/interop/check_regenerate_command.py "$scratch" || exit 1
echo "== torch 2.6"
bash tests/interop/with_torch26.sh tests/interop/check_regenerate_command.py "$scratch"
