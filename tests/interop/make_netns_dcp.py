"""The checkpoint dcp_netns runs on, written by torch 2.6 itself: 4 FSDP2 ranks.

Usage (inside the torch 2.6 chroot, from the repository root):
  python3 tests/interop/make_netns_dcp.py OUTDIR
Writes
  OUTDIR/dcp/    dcp.save({"model": msd, "optim": osd}) of get_state_dict(model, optim)
                 after one AdamW step: each rank's shards in its own __r_0.distcp
  OUTDIR/big.pt  rank 0's torch.save of the same state as whole tensors
                 (get_state_dict with full_state_dict=True, cpu_offload=True)
About 290 MiB each. Shapes the shards do not divide evenly (8003 rows over 4
ranks, a 1-row gate that leaves three ranks empty) so every kind of chunk
appears. Generated when the test runs, not committed: it is large, and the
run takes about 13 s on 2 cores.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "gen"))
from gen_dcp_fsdp2 import free_port, join_and_shard  # noqa: E402

WORLD = 4
VOCAB = 8003


class NetnsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 1024)
        self.up = nn.Linear(1024, 2048)
        self.mid = nn.Linear(2048, 2048)
        self.down = nn.Linear(2048, 1024)
        self.head = nn.Linear(1024, VOCAB)
        self.gate = nn.Linear(1024, 1)

    def forward(self, idx):
        h = self.emb(idx)
        h = self.down(torch.relu(self.mid(torch.relu(self.up(h)))))
        return self.head(h) * torch.sigmoid(self.gate(h))


def worker(rank, port, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    model = join_and_shard(rank, WORLD, port, 0, NetnsNet)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(7)  # every rank sees the same batch
    idx = torch.randint(0, VOCAB, (2, 8), generator=g)
    model(idx).square().mean().backward()
    opt.step()
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(out, "dcp"))
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    fmsd, fosd = get_state_dict(model, opt, options=full)
    if rank == 0:
        torch.save({"model": fmsd, "optim": fosd}, os.path.join(out, "big.pt"))
    dist.barrier()
    dist.destroy_process_group()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.multiprocessing.spawn(worker, args=(free_port(), out), nprocs=WORLD)


if __name__ == "__main__":
    main()
