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


def main():
    scratch = sys.argv[1]
    cases = []
    for name in FIXTURES:
        cases.append((f"{name}: consolidate == dcp_to_torch_save", lambda n=name: check_fqn(scratch, n)))
        cases.append((f"{name}: consolidate --to index loads into AdamW", lambda n=name: check_index(scratch, n)))
    return cf.run_checks("checking optstate's DCP outputs", cases)


if __name__ == "__main__":
    sys.exit(main())
