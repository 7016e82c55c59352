#!/bin/bash
# The fused loops are compiled three times each (adamw_{generic,avx2,avx512}.cc
# and family_{generic,avx2,avx512}.cc) with different target flags. Checks that
# the objects really differ and cannot be merged by the linker:
#   - none defines a weak (W/V) or unique (u) symbol: such a symbol is kept once
#     per program, so every variant would run whichever copy the linker saw first
#     (this happened: all three ran the baseline loop);
#   - the avx512 object uses zmm registers, the avx2 one ymm, the generic one
#     neither.
# Usage: tests/build/check_kernel_variants.sh [--symbols-only] OBJECT...
#   (the optstate_optim objects; --symbols-only skips the register check, for
#   sanitizer builds, where the instrumented loop may not be vectorised)
set -uo pipefail
registers=1
if [ "${1:-}" = --symbols-only ]; then registers=0; shift; fi
failed=0
declare -A want=([generic]="" [avx2]="%ymm" [avx512]="%zmm")
for kernel in adamw family; do
for isa in generic avx2 avx512; do
  obj= bad=0 checked="own symbols only"
  for o in "$@"; do [[ "$o" == */${kernel}_$isa.cc.o ]] && obj=$o; done
  if [ -z "$obj" ]; then echo "FAIL ${kernel}_$isa.cc.o is not among the objects given"; failed=1; continue; fi
  shared=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[WVu]$/')
  if [ -n "$shared" ]; then
    echo "FAIL ${kernel}_$isa: symbols the linker would share between variants:"; echo "$shared"; bad=1
  fi
  if [ "$registers" = 1 ]; then
    code=$(objdump -d --no-show-raw-insn "$obj")
    if [ -n "${want[$isa]}" ] && ! grep -q "${want[$isa]}" <<< "$code"; then
      echo "FAIL ${kernel}_$isa: no ${want[$isa]} register in its code"; bad=1
    fi
    if [ "$isa" = generic ] && grep -qE "%ymm|%zmm" <<< "$code"; then
      echo "FAIL ${kernel}_generic: uses ymm/zmm registers, which the x86-64 baseline does not have"; bad=1
    fi
    checked+="${want[$isa]:+, uses ${want[$isa]}}"
  else
    checked+=" (registers not checked in this build)"
  fi
  if [ "$bad" = 0 ]; then echo "ok   ${kernel}_$isa: $checked"; else failed=1; fi
done
done
exit "$failed"
