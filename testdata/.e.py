import sys, torch, types
hb = types.ModuleType("heavyball"); hb.ForeachSOAP = type("ForeachSOAP", (), {}); sys.modules["heavyball"] = hb
sd = torch.load(sys.argv[1], weights_only=False)
for k, v in sd["state"].items():
    print(tuple(k[0].shape), k[1], {n: (tuple(x.shape) if isinstance(x, torch.Tensor) else x if not isinstance(x, list) else [tuple(q.shape) if isinstance(q, torch.Tensor) else q for q in x]) for n, x in v.items()})
