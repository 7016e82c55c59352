import sys, torch
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, "testdata/gen")
import heavyball, heavyball.utils
heavyball.utils.compile_mode = None
from gen_heavyball_migrate import Net, batches, train
for lr in (1e-2, 1e-3):
    for fe in ((False,) if "0.24" in sys.argv[1] else (None,)):
        torch.manual_seed(0); m = Net()
        kw = {} if fe is None else {"foreach": fe}
        opt = heavyball.ForeachSOAP(m.parameters(), lr=lr, split=True, max_precond_dim=32, **kw)
        train(m, opt, batches(3))
        print(sys.argv[1], lr, max(float(p.abs().max()) for p in m.parameters()))
