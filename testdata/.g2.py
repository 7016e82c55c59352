import sys, torch
sd = torch.load(sys.argv[1], weights_only=False)
for k, v in list(sd["state"].items())[:8]:
    print(k, tuple(v["exp_avg"].shape))
print(len(sd["state"]))
