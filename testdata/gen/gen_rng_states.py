"""The RNG-state file accelerate's save_state writes beside the model and optimizer
(random_states_<rank>.pkl: torch.save of Python's, numpy's and torch's RNG states), for issue 19's
rules-file allowlist: numpy's array reconstruction is outside torch's weights_only allowlist, a
warning a team allowlists by name.

Usage: gen_rng_states.py OUTDIR   (torch 1.13, /usr/bin/python3, with numpy)
Writes OUTDIR/random_states_0.pkl, seeded, with the keys accelerate uses (its code is not run).
"""
import os
import random
import sys

import numpy as np
import torch


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    states = {"step": 0, "random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
              "torch_manual_seed": torch.get_rng_state()}
    torch.save(states, os.path.join(out, "random_states_0.pkl"))


if __name__ == "__main__":
    main()
