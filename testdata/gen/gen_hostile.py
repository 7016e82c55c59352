"""Write checkpoints whose pickles would run code if loaded with pickle/torch.load.

Usage: /usr/bin/python3 testdata/gen/gen_hostile.py OUTDIR
Each file is made by torch.save / pickle.dumps of an object whose __reduce__ names
a dangerous callable. Pickling only records the name: nothing here is executed,
and optstate must report every one of them without running anything.
Also writes a benign HeavyBall-style file (a pickled random.Random in a bytes
value) to show the difference between 'not allowlisted' and 'dangerous'.
"""
import os
import pickle
import random
import sys

import torch


class Call:
    """Pickles as a call of fn(*args); never calls it."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


# If any reader ever executed these pickles, this file would appear; the tests
# check that it never does.
MARKER = "/tmp/optstate-hostile-pickle-ran"
RUN = f"touch {MARKER}"


def state_with(extra):
    return {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(2)}},
            "param_groups": [{"lr": 0.1, "params": [0]}], "extra": extra}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {
        # GLOBAL (protocol 2): posix.system on Linux.
        "os_system_global.pt": (state_with(Call(os.system, RUN)), 2),
        # STACK_GLOBAL (protocol 4).
        "os_system_stack_global.pt": (state_with(Call(os.system, RUN)), 4),
        "builtins_eval.pt": (state_with(Call(eval, f"__import__('os').system('{RUN}')")), 2),
        # A pickle inside a bytes value, as HeavyBall stores precond_schedule.
        "nested_pickle_bytes.pt": (state_with(pickle.dumps(Call(os.system, RUN), protocol=4)), 2),
        # Benign but not weights_only-loadable: HeavyBall 2.x's precond_rng.
        "heavyball_rng_bytes.pt": (state_with(pickle.dumps(random.Random(0), protocol=4)), 2),
    }
    for name, (obj, protocol) in cases.items():
        path = os.path.join(out, name)
        torch.save(obj, path, pickle_protocol=protocol)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
