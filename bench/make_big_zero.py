"""A >= 2 GiB DeepSpeed ZeRO checkpoint made by DeepSpeed itself, for bench/zero_bench.sh.

Usage (torch 2.6 chroot): make_big_zero.py DEEPSPEED_SRC OUTDIR STAGE [LAYERS=12]
LAYERS Linear(4096, 4096) layers (16.8 M parameters each, biases in a second param group, a frozen
embedding), 2 ranks (mp.spawn, gloo, DS_ACCELERATOR=cpu), one AdamW step inside ZeRO-STAGE, then
engine.save_checkpoint(OUTDIR, tag="global_step1"). With 12 layers: 201 M parameters; the rank files
hold fp32 master weights, exp_avg and exp_avg_sq (2.4 GB), the model states the weights (0.8 GB).
"""
import os
import socket
import sys

os.environ["DS_ACCELERATOR"] = "cpu"
sys.path.insert(0, sys.argv[1])
OUT, STAGE = sys.argv[2], int(sys.argv[3])
LAYERS = int(sys.argv[4]) if len(sys.argv) > 4 else 12

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


class Big(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 4096)  # frozen
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4096, 4096) for _ in range(LAYERS))

    def forward(self, idx):
        x = self.emb(idx)
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def worker(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2")
    torch.set_num_threads(1)
    import deepspeed
    import deepspeed.ops
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # as in testdata/gen/gen_deepspeed_zero.py
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(1)
    model = Big()
    model.emb.weight.requires_grad_(False)
    weights = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": weights, "weight_decay": 0.01}, {"params": biases, "weight_decay": 0.0}],
                            lr=1e-4)
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": STAGE}, "steps_per_print": 1000}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    idx = torch.randint(0, 16, (2,), generator=torch.Generator().manual_seed(rank))
    engine.backward(engine(idx).square().mean())
    engine.step()
    engine.save_checkpoint(OUT, tag="global_step1")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port,), nprocs=2, join=True)
