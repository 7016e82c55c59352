"""Every torch.optim.lr_scheduler class (by introspection) run over one AdamW optimizer, for the
enumerated corpus (gen_enumerated_corpus.py).
"""
import inspect
import os

import torch

from enumerate_training import batches, build, step, param_table, first_line


SCHEDULE_STEPS = 6
# Values for the constructor parameters a scheduler requires, by name (the classes
# themselves are found, not listed). total_steps is optional but OneCycleLR needs it or epochs.
SCHEDULER_VALUES = {"T_max": SCHEDULE_STEPS, "T_0": 3, "base_lr": 1e-3, "max_lr": 1e-2, "gamma": 0.5,
                    "lr_lambda": lambda step: 0.9 ** step, "milestones": [2, 4], "step_size": 2,
                    "total_steps": SCHEDULE_STEPS, "step_size_up": 2}


def scheduler_classes():
    """Every class of torch.optim.lr_scheduler that schedules an optimizer (or other schedulers)."""
    m = torch.optim.lr_scheduler
    out = []
    for name in sorted(dir(m)):
        c = getattr(m, name)
        if not isinstance(c, type) or c.__module__ != m.__name__ or name.startswith("_") or not hasattr(c, "state_dict"):
            continue
        params = [p for p in inspect.signature(c.__init__).parameters.values() if p.name != "self"]
        if params and params[0].name in ("optimizer", "schedulers") and name not in ("LRScheduler",):
            out.append(c)
    return out


def make_scheduler(cls, opt, flip=None):
    """cls over opt with the SCHEDULER_VALUES it requires (and bool parameter `flip` flipped)."""
    params = inspect.signature(cls.__init__).parameters
    kwargs = {flip: not params[flip].default} if flip else {}
    for name, p in params.items():
        if name in ("self", "optimizer"):
            continue
        if name == "schedulers":  # three children, so milestones [2, 4] fits SequentialLR
            m = torch.optim.lr_scheduler
            kwargs[name] = [m.LinearLR(opt, start_factor=0.5, total_iters=2), m.ConstantLR(opt, factor=0.5, total_iters=2),
                            m.ExponentialLR(opt, gamma=0.9)]
        elif name in SCHEDULER_VALUES and (p.default is inspect.Parameter.empty or p.default is None):
            kwargs[name] = SCHEDULER_VALUES[name]
    if "optimizer" in params and list(params)[1] != "optimizer":
        kwargs["optimizer"] = opt  # ChainedScheduler(schedulers, optimizer=None) in 2.x
    sched = cls(opt, **kwargs) if list(params)[1] == "optimizer" else cls(**kwargs)
    return sched, {k: v for k, v in kwargs.items() if k not in ("schedulers", "lr_lambda", "optimizer")}


def scheduler_cases(out, cases, skipped):
    """AdamW under every scheduler class, saved at the start, middle and end of its schedule: the
    scheduler's state inside the checkpoint, and alone as a framework's scheduler.pt beside it."""
    recipes = [(c.__name__, c, None) for c in scheduler_classes()]
    # The warmup recipe whose first lr (1e-10) rounds every float32 update away, and the same
    # stepped per epoch, saved mid-epoch: 3 optimizer steps all at lr 1e-10.
    recipes.append(("WarmupLinear1e-8", torch.optim.lr_scheduler.SequentialLR, "warmup"))
    recipes.append(("WarmupPerEpoch1e-8", torch.optim.lr_scheduler.LinearLR, "warmup_epoch"))
    for name, cls, special in recipes:
        for when, steps in (("start", 0), ("middle", SCHEDULE_STEPS // 2), ("end", SCHEDULE_STEPS)):
            case = f"sched_{name.lower().replace('-', '_')}_{when}"
            try:
                net, opt, _ = build(torch.optim.AdamW, {"lr": 1e-2})
                if special == "warmup":
                    m = torch.optim.lr_scheduler
                    sched = m.SequentialLR(opt, [m.LinearLR(opt, start_factor=1e-8, total_iters=3),
                                                 m.CosineAnnealingLR(opt, T_max=3)], milestones=[3])
                    args = {"warmup": "LinearLR(start_factor=1e-8, total_iters=3) then CosineAnnealingLR(T_max=3)"}
                elif special == "warmup_epoch":
                    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1e-8, total_iters=5)
                    args = {"warmup": "LinearLR(start_factor=1e-8, total_iters=5), stepped per epoch"}
                else:
                    # What a constructor refuses with its defaults (1.13's CyclicLR cycles a momentum
                    # AdamW lacks) is tried once with each bool parameter flipped.
                    flips = [None] + [n for n, p in inspect.signature(cls.__init__).parameters.items()
                                      if isinstance(p.default, bool) and n != "verbose"]
                    for i, flip in enumerate(flips):
                        try:
                            net, opt, _ = build(torch.optim.AdamW, {"lr": 1e-2})
                            sched, args = make_scheduler(cls, opt, flip)
                            break
                        except Exception:  # noqa: BLE001
                            if i == len(flips) - 1:
                                raise
                plateau = "metrics" in inspect.signature(sched.step).parameters
                for i, batch in enumerate(batches(1) + batches(3)):
                    if i >= steps:
                        break
                    step(net, opt, None, batch)
                    if special != "warmup_epoch":
                        sched.step(0.5) if plateau else sched.step()
                state = {"model": net.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()}
                torch.save(state, os.path.join(out, case + ".pt"))
                torch.save(sched.state_dict(), os.path.join(out, case + "_alone.pt"))
            except Exception as e:  # noqa: BLE001
                skipped.append({"case": case, "scheduler": f"torch.optim.lr_scheduler.{name}",
                                "tries": [{"error": first_line(e)}]})
                continue
            common = {"class": "torch.optim.AdamW", "variant": "default", "kwargs": {"lr": 1e-2}, "param_groups": 1,
                      "sparse_gradients": False, "scheduler": f"torch.optim.lr_scheduler.{cls.__name__}",
                      "scheduler_args": {k: v for k, v in args.items() if isinstance(v, (int, float, str, list))},
                      "schedule_steps": steps, "healthy": True}
            cases.append(dict(common, case=case, file=case + ".pt", kind="scheduler", params=param_table(net, opt)))
            cases.append(dict(common, case=case + "_alone", file=case + "_alone.pt", kind="scheduler-alone", params=[]))
