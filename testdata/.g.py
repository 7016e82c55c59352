import sys, torch
sd = torch.load(sys.argv[1], weights_only=False)
for k, v in list(sd["state"].items())[:4]:
    if isinstance(k, int):
        print(k, {vi: (tuple(d["scale_by_soap_exp_avg_2"].shape), [None if q is None else tuple(q.shape) for q in d["scale_by_soap_Q_3"]]) for vi, d in v.items()})
    else:
        print(k, tuple(v["exp_avg"].shape), [tuple(q.shape) if isinstance(q, torch.Tensor) else q for q in v["Q"]])
