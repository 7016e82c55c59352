"""The training loop both parity generators record (gen_adamw_parity.py,
gen_optimizer_parity.py): seeded gradients stored in the parameters' dtype, a
torch.optim step, the parameters rounded back to that dtype as the fused kernel
stores them, and every row flattened after each step."""

import torch


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def record_steps(params, opt, dtype, generator, steps, rows, fields):
    """Appends to rows["grads"], rows["params"], rows[f] for f in fields and
    rows["step"] (when the state keeps one) after each of `steps` steps."""
    for _ in range(steps):
        for p in params:
            p.grad = (torch.randn(p.shape, generator=generator) * 0.1).to(dtype).float()
        rows["grads"].append(flat([p.grad for p in params]))
        opt.step()
        with torch.no_grad():
            for p in params:
                p.copy_(p.to(dtype).float())  # the stored low-precision parameter
        st = [opt.state[p] for p in params]
        rows["params"].append(flat(params))
        for f in fields:
            rows[f].append(flat([s[f] for s in st]))
        if "step" in st[0]:
            rows["step"].append(torch.tensor([float(s["step"]) for s in st]))
