#!/bin/bash
# 200 torch.save checkpoints ({model, optimizer} of an MLP trained one AdamW
# step, 16-44 MB each, five shapes) in DIR/run<k>/, for validate_each_bench.sh.
# Usage: bench/make_checkpoint_zoo.sh DIR   (needs /usr/bin/python3 with torch)
set -euo pipefail
dir=$1
mkdir -p "$dir/src"
/usr/bin/python3 - "$dir/src" <<'PY'
import sys, torch
torch.manual_seed(0)
for i, (layers, width) in enumerate([(20, 256), (40, 256), (15, 384), (25, 384), (20, 320)]):
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, width)).sum().backward()
    opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f"{sys.argv[1]}/src{i}.pt")
PY
for i in $(seq 0 199); do
  mkdir -p "$dir/run$((i / 20))"
  cp "$dir/src/src$((i % 5)).pt" "$dir/run$((i / 20))/ckpt$(printf %03d "$i").pt"
done
rm -r "$dir/src"
