"""optstate.capture in a live torch process: the manifest it writes is the
README's, optstate's reader takes it, and its data_ptr places pointer-keyed
state (keyed as HeavyBall 0.12-0.24 keyed it) exactly."""

import json

import pytest

import optstate
import optstate.capture

torch = pytest.importorskip("torch")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 4)
        self.fc = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.head = torch.nn.Linear(4, 11, bias=False)
        self.head.weight = self.emb.weight  # tied: one parameter, two names

    def forward(self, idx):
        return self.head(self.norm(self.fc(self.emb(idx))))


def trained():
    torch.manual_seed(0)
    model = Net()
    decay = [model.emb.weight, model.fc.weight]
    no_decay = [model.fc.bias, model.norm.weight, model.norm.bias]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2)
    for _ in range(2):
        model(torch.randint(0, 11, (3, 5))).sum().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def readme_snippet(model, optimizer):
    names = {id(p): n for n, p in model.named_parameters()}
    params = [{"name": names[id(p)], "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
               "data_ptr": p.data_ptr(), "nbytes": p.numel() * p.element_size(), "group": gi}
              for gi, g in enumerate(optimizer.param_groups) for p in g["params"]]
    return {"format": "optstate-param-manifest", "version": 1, "params": params}


def test_manifest_is_the_readme_snippets(tmp_path):
    model, opt = trained()
    written = optstate.capture.write_manifest(model, opt, tmp_path / "params.json")
    assert written == str(tmp_path / "params.json")
    assert json.loads((tmp_path / "params.json").read_text()) == readme_snippet(model, opt)
    assert [p["name"] for p in optstate.capture.manifest(model, opt)["params"]] == [
        "emb.weight", "fc.weight", "fc.bias", "norm.weight", "norm.bias"]
    assert list(tmp_path.iterdir()) == [tmp_path / "params.json"]  # no temporary left


def test_rank_placeholder_outside_a_process_group(tmp_path):
    model, opt = trained()
    assert optstate.capture.write_manifest(model, opt, tmp_path / "p.rank{rank}.json").endswith("p.rank0.json")


def test_a_parameter_the_model_lacks_is_refused():
    model, opt = trained()
    opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
    with pytest.raises(ValueError, match=r"shape \[2\] that the model does not"):
        optstate.capture.manifest(model, opt)


def test_pointer_keyed_state_placed_exactly(tmp_path):
    model, opt = trained()
    manifest = optstate.capture.write_manifest(model, opt, tmp_path / "params.json")
    sd = opt.state_dict()
    params = [p for g in opt.param_groups for p in g["params"]]
    # HeavyBall 0.12-0.24's keys: (data_ptr, shape) of each parameter
    sd["state"] = {(params[i].data_ptr(), tuple(params[i].shape)): v for i, v in sd["state"].items()}
    torch.save(sd, tmp_path / "optim.pt")
    found = optstate.collisions(tmp_path / "optim.pt", manifest=manifest)
    assert found["collisions"] == [] and found["orphans"] == [] and found["ambiguous"] == []
    assert [k["params"] for k in found["keys"]] == [[p["name"]] for p in json.load(open(manifest))["params"]]
    assert {k["confidence"] for k in found["keys"]} == {"exact"}
    report = optstate.validate(tmp_path / "optim.pt", manifest=manifest, no_values=True)
    assert "state-keys-not-canonical" in {f["rule"] for f in report["findings"]}
    fixed = optstate.remap(tmp_path / "optim.pt", tmp_path / "fixed.pt", manifest=manifest)
    assert fixed["output"] == str(tmp_path / "fixed.pt")
    assert optstate.validate(tmp_path / "fixed.pt", manifest=manifest)["passed"] is True
