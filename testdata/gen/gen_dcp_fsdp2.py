"""Real FSDP2 distributed checkpoints (torch 2.6, CPU, gloo, 2 and 3 ranks) of model + AdamW.

Usage (inside the torch 2.6 chroot, see torch26-python.sh):
  python3 testdata/gen/gen_dcp_fsdp2.py OUTDIR
Writes
  OUTDIR/fsdp2_dcp/                      dcp.save({"model": msd, "optim": osd}) of
                                         get_state_dict(model, optim) after 3 steps
  OUTDIR/fsdp2_dcp.expected.json         .metadata as torch reads it (see dcp_description)
  OUTDIR/fsdp2_dcp.consolidated.pt       torch's own dcp_to_torch_save of that directory
  OUTDIR/fsdp2_dcp.consolidated.pt.expected.json
  OUTDIR/fsdp2_3rank_dcp/ (+ .expected.json, .consolidated.pt)   the same on 3 ranks
  OUTDIR/fsdp2_rank{0,1}_optim.pt        each rank's torch.save(optim.state_dict()):
                                         int keys, DTensor moments holding local shards
The model has awkward shapes for sharding: head.weight has 3 rows over 2 ranks
(2 + 1) and gate has 1 row, so rank 1's chunk of it is empty; on 3 ranks emb's
10 rows split 4 + 4 + 2 and gate leaves two ranks empty.

torch 2.6 as Debian ships it needs three things on CPU, all local to this script:
USE_LIBUV=0 (no libuv; set by torch26-python.sh), torch.multiprocessing.spawn
instead of torchrun (whose store ignores USE_LIBUV), and two patches: CPU streams
lack record_event/wait_event, and gloo's reduce_scatter_tensor computes SUM when
asked for AVG, which would scale every gradient by the world size. Before writing,
the consolidated result is checked against a single-process run of the same
training, so the fixture is known to hold the right numbers.
"""
import os
import socket
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402

# DCP's filesystem writer calls tensor.storage() itself; its deprecation warning is noise here.
warnings.filterwarnings("ignore", message="TypedStorage is deprecated")

WORLDS = (2, 3)  # fsdp2_dcp/ and fsdp2_3rank_dcp/
STEPS = 3


class DcpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)
        self.gate = nn.Linear(6, 1)

    def forward(self, idx):
        h = torch.relu(self.fc1(self.emb(idx)))
        h = torch.relu(self.fc2(h))
        return self.head(h) * torch.sigmoid(self.gate(h))


def train(model, opt):
    g = torch.Generator().manual_seed(7)  # every rank sees the same batches
    for _ in range(STEPS):
        idx = torch.randint(0, 10, (4, 5), generator=g)
        tgt = torch.randn(4, 5, 3, generator=g)
        loss = ((model(idx) - tgt) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def patch_cpu_gloo():
    import torch.distributed as dist
    if not hasattr(torch.cpu.Stream, "record_event"):
        torch.cpu.Stream.record_event = lambda self, event=None: torch.cpu.Event()
    if not hasattr(torch.cpu.Stream, "wait_event"):
        torch.cpu.Stream.wait_event = lambda self, event: None
    gloo_reduce_scatter = dist.reduce_scatter_tensor

    def reduce_scatter_tensor(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if output.device.type != "cpu":
            return gloo_reduce_scatter(output, input, op=op, group=group, async_op=async_op)
        full = input.clone()
        mean = op == dist.ReduceOp.AVG
        dist.all_reduce(full, op=dist.ReduceOp.SUM if mean else op, group=group)
        if mean:
            full.div_(dist.get_world_size(group))
        mine = full.view(dist.get_world_size(group), -1)[dist.get_rank(group)]
        output.copy_(mine.view_as(output))
        return None

    dist.reduce_scatter_tensor = reduce_scatter_tensor


def dcp_name(world):
    return "fsdp2_dcp" if world == 2 else f"fsdp2_{world}rank_dcp"


def join_and_shard(rank, world, port, seed, make_model):
    """Joins a gloo group of `world` ranks on 127.0.0.1:port and returns
    make_model(), made after torch.manual_seed(seed), with FSDP2 applied to each
    of its child modules and then to the whole (kept unsharded after forward)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    patch_cpu_gloo()
    torch.manual_seed(seed)
    model = make_model()
    mesh = init_device_mesh("cpu", (world,))
    for sub in model.children():
        fully_shard(sub, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    return model


def worker(rank, world, port, dcp_dir):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model = join_and_shard(rank, world, port, 0, DcpNet)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    train(model, opt)
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=dcp_dir)
    # What a job that skips DCP saves per rank: the optimizer's own state_dict,
    # whose moments are DTensors holding this rank's shard.
    if world == 2:
        torch.save(opt.state_dict(), f"fsdp2_rank{rank}_optim.pt")
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_against_single_process(consolidated):
    sd = torch.load(consolidated, weights_only=True)
    torch.manual_seed(0)
    ref = DcpNet()
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01)
    train(ref, opt)
    worst = 0.0
    for name, p in ref.named_parameters():
        worst = max(worst, (sd["model"][name] - p.detach()).abs().max().item())
        for k in ("exp_avg", "exp_avg_sq"):
            worst = max(worst, (sd["optim"]["state"][name][k] - opt.state[p][k]).abs().max().item())
        assert float(sd["optim"]["state"][name]["step"]) == STEPS
    if worst > 1e-5:
        raise SystemExit(f"FSDP2 result differs from single-process training by {worst}")
    return worst


def dcp_description(dcp_dir):
    """.metadata as torch reads it, plus the files, for C++ tests to compare with."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata
    md = FileSystemReader(dcp_dir).read_metadata()
    entries = []
    for fqn, meta in md.state_dict_metadata.items():
        if isinstance(meta, BytesStorageMetadata):
            entries.append({"fqn": fqn, "kind": "bytes"})
            continue
        entries.append({
            "fqn": fqn, "kind": "tensor",
            "dtype": str(meta.properties.dtype).replace("torch.", ""),
            "size": list(meta.size),
            "chunks": [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in meta.chunks],
        })
    storage = [{"fqn": idx.fqn, "offset": None if idx.offset is None else list(idx.offset),
                "index": idx.index, "relative_path": info.relative_path,
                "file_offset": info.offset, "length": info.length}
               for idx, info in md.storage_data.items()]
    files = sorted(os.listdir(dcp_dir))
    world = sum(1 for f in files if f.endswith("_0.distcp"))
    return {
        "fixture": os.path.basename(dcp_dir),
        "covers": f"FSDP2 DCP checkpoint, {world} ranks, model + AdamW after {STEPS} steps",
        "torch": torch.__version__.split("+")[0],
        "files": [{"name": f, "size": os.path.getsize(os.path.join(dcp_dir, f))} for f in files],
        "state_dict_metadata": entries,
        "planner_data": [{"key": k, "path": list(v)} for k, v in md.planner_data.items()],
        "storage_data": storage,
    }


def main():
    import json
    import shutil

    import torch.multiprocessing as mp
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # .metadata records the checkpoint path as given: a fixed relative one keeps
    # the file identical wherever it is regenerated.
    os.chdir(out)
    for world in WORLDS:
        dcp_dir = dcp_name(world)
        shutil.rmtree(dcp_dir, ignore_errors=True)
        mp.spawn(worker, args=(world, free_port(), dcp_dir), nprocs=world, join=True)
        consolidated = dcp_dir + ".consolidated.pt"
        dcp_to_torch_save(dcp_dir, consolidated)
        worst = check_against_single_process(consolidated)
        describe.write_expected(consolidated, f"torch's dcp_to_torch_save of {dcp_dir}")
        with open(dcp_dir + ".expected.json", "w") as f:
            json.dump(dcp_description(dcp_dir), f, indent=1)
            f.write("\n")
        print(f"{dcp_dir}: {len(os.listdir(dcp_dir))} files; max |FSDP2 - single process| = {worst:.3g}")
    for rank in range(2):
        describe.write_expected(f"fsdp2_rank{rank}_optim.pt",
                                f"FSDP2 rank {rank}'s own optim.state_dict(): DTensor moments (local shards)")


if __name__ == "__main__":
    main()
