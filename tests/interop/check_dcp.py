"""torch 2.6 checks optstate's DCP commands against torch's own DCP code.

Usage: python3 tests/interop/check_dcp.py SCRATCH   (check_dcp.sh fills SCRATCH)
For each FSDP2 fixture <name> (testdata/good/torch26/<name>/, 2 and 3 ranks):
  SCRATCH/<name>.fqn.pt    optstate consolidate: must equal torch's dcp_to_torch_save
                           (the committed <name>.consolidated.pt): same nesting, key
                           types and order, tensors bit for bit; loads with
                           weights_only=True.
  SCRATCH/<name>.index.pt  consolidate --to index: torch.optim.AdamW of the model
                           takes its "optim" through load_state_dict and files every
                           entry under the parameter of that name.
  SCRATCH/<case>.dcp/      reshard or export output (check_dcp.sh lists the cases as
                           <case>.dcp with a file <case>.dcp.source naming the training
                           run it must hold and <case>.dcp.world its world size):
                           torch's dcp_to_torch_save of it equals that run's
                           consolidated file and our consolidate of it, and dcp.load of it into an FSDP2 model
                           of that world size (get_state_dict/set_state_dict) gives
                           parameters and AdamW state equal to it, bit for bit.
Ends with 'N passed, N failed, N skipped'.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_fixtures as cf  # noqa: E402

sys.path.insert(0, os.path.join(cf.REPO, "testdata", "gen"))
import gen_dcp_fsdp2  # noqa: E402

torch = cf.torch
FIXTURES = ("fsdp2_dcp", "fsdp2_3rank_dcp")


def fixture(name):
    return os.path.join(cf.REPO, "testdata", "good", "torch26", name)


def key_order(a, b, path="$"):
    """dict key order matters to torch.optim (state order) and to equality with torch."""
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: key order {list(a)[:4]} != {list(b)[:4]}"
        for k in a:
            d = key_order(a[k], b[k], f"{path}.{k}")
            if d:
                return d
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = key_order(x, y, f"{path}[{i}]")
            if d:
                return d
    return None


def check_fqn(scratch, name):
    ours = torch.load(os.path.join(scratch, name + ".fqn.pt"), weights_only=True)
    theirs = torch.load(fixture(name) + ".consolidated.pt", weights_only=True)
    return cf.first_difference(theirs, ours) or key_order(theirs, ours)


def check_index(scratch, name):
    sd = torch.load(os.path.join(scratch, name + ".index.pt"), weights_only=True)
    by_name = torch.load(fixture(name) + ".consolidated.pt", weights_only=True)["optim"]
    model = gen_dcp_fsdp2.DcpNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    opt.load_state_dict(sd["optim"])
    for pname, p in model.named_parameters():
        d = cf.first_difference(by_name["state"][pname], opt.state[p], f"state[{pname}]")
        if d:
            return d
    if opt.param_groups[0]["lr"] != by_name["param_groups"][0]["lr"]:
        return "lr not carried"
    model_sd = torch.load(fixture(name) + ".consolidated.pt", weights_only=True)["model"]
    return cf.first_difference(model_sd, sd["model"], "model")


def load_worker(rank, world, port, dcp_dir, out):
    """One rank of an FSDP2 job that loads `dcp_dir` and saves what it got (rank 0)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    # Seed 1, not training's 0: every value must come from the checkpoint.
    model = gen_dcp_fsdp2.join_and_shard(rank, world, port, 1, gen_dcp_fsdp2.DcpNet)
    opt = torch.optim.AdamW(model.parameters(), lr=0.5, weight_decay=0.5)
    msd, osd = get_state_dict(model, opt)
    dcp.load({"model": msd, "optim": osd}, checkpoint_id=dcp_dir)
    set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)
    full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    got = {"model": {n: full(p.detach()) for n, p in model.named_parameters()},
           "state": {n: {k: full(v) for k, v in opt.state[p].items()} for n, p in model.named_parameters()},
           "lr": opt.param_groups[0]["lr"]}
    if rank == 0:
        torch.save(got, out)
    dist.barrier()
    dist.destroy_process_group()


def spawn_load(world, dcp_dir, out):
    """Runs load_worker on `world` ranks. torch 2.6's gloo on CPU now and then
    aborts a rank outright (SIGABRT, "terminate called without an active
    exception"; seen once in CI, not reproduced in 3 runs by hand): that job,
    torch's own, runs once more, saying so. A rank that raises (dcp.load
    refusing or misreading our file) is never retried."""
    import torch.multiprocessing as mp
    for attempt in (1, 2):
        try:
            mp.spawn(load_worker, args=(world, gen_dcp_fsdp2.free_port(), dcp_dir, out), nprocs=world, join=True)
            return
        except mp.ProcessExitedException as e:
            if attempt == 2 or not getattr(e, "signal_name", None):
                raise
            print(f"note: torch's dcp.load job lost a rank to {e.signal_name}; running it once more",
                  file=sys.stderr)


def check_written(scratch, case):
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    dcp_dir = os.path.join(scratch, case)
    source = open(dcp_dir + ".source").read().strip()
    world = int(open(dcp_dir + ".world").read())
    want = torch.load(fixture(source) + ".consolidated.pt", weights_only=True)
    theirs = dcp_dir + ".torch.pt"
    dcp_to_torch_save(dcp_dir, theirs)
    d = cf.first_difference(want, torch.load(theirs, weights_only=True), "dcp_to_torch_save")
    if d:
        return d
    ours = torch.load(dcp_dir + ".ours.pt", weights_only=True)
    d = cf.first_difference(torch.load(theirs, weights_only=True), ours, "dcp_to_torch_save vs our consolidate")
    d = d or key_order(torch.load(theirs, weights_only=True), ours)
    if d:
        return d
    out = dcp_dir + ".loaded.pt"
    spawn_load(world, dcp_dir, out)
    got = torch.load(out, weights_only=True)
    d = cf.first_difference(want["model"], got["model"], f"dcp.load on {world} ranks: model")
    if d:
        return d
    for name, fields in want["optim"]["state"].items():
        d = cf.first_difference(fields, got["state"][name], f"dcp.load on {world} ranks: state[{name}]")
        if d:
            return d
    if got["lr"] != want["optim"]["param_groups"][0]["lr"]:
        return f"lr {got['lr']} != {want['optim']['param_groups'][0]['lr']}"
    return None


def main():
    import warnings
    warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
    scratch = sys.argv[1]
    cases = []
    for case in sorted(f for f in os.listdir(scratch) if f.endswith(".dcp")):
        cases.append((f"{case}: dcp_to_torch_save and FSDP2 dcp.load", lambda c=case: check_written(scratch, c)))
    for name in FIXTURES:
        cases.append((f"{name}: consolidate == dcp_to_torch_save", lambda n=name: check_fqn(scratch, n)))
        cases.append((f"{name}: consolidate --to index loads into AdamW", lambda n=name: check_index(scratch, n)))
    return cf.run_checks("checking optstate's DCP outputs", cases)


if __name__ == "__main__":
    sys.exit(main())
