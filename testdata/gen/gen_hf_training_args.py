"""HF Trainer's training_args.bin, in the three shapes real files have, without transformers.

Usage: gen_hf_training_args.py OUT_FILE ERA      (ERA as below; torch 1.13 for cached_devices,
                                                  torch 2.6 for the others)

transformers' Trainer saves its TrainingArguments with torch.save. transformers is not in Debian
and too large to fetch, so this writes the same pickle with stand-in classes registered under
transformers' and accelerate's module names: a dataclass pickled by NEWOBJ + BUILD, str enums by
REDUCE(cls, (value,)), torch.device by REDUCE. The globals, the opcodes that use them and the
dict keys that hold them were read off real training_args.bin files that HF Trainer wrote,
committed to public repositories (testdata/frameworks/hf_training_args/real_files.json names
them, with the verdict optstate gives each; check_hf_training_args.py holds the replicas to it):

  cached_devices      evaluation_strategy, IntervalStrategy / SchedulerType / OptimizerNames /
                      HubStrategy enums, __cached__setup_devices = torch.device('cuda', 0); no
                      accelerate objects (written by torch < 2.1)
  partial_state       distributed_state: accelerate's PartialState holding a torch.device and a
                      DistributedType enum
  accelerator_config  and accelerator_config: transformers' AcceleratorConfig dataclass
  save_strategy       and save_strategy as a SaveStrategy enum
  seq2seq             the same held by Seq2SeqTrainingArguments (Seq2SeqTrainer)
  sft_config          the same held by TRL's SFTConfig (SFTTrainer)
"""
import dataclasses
import enum
import sys
import types

import torch


def module(name):
    """A stand-in module registered with its parents, so pickle finds classes by these names."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    return sys.modules[name]


def place(cls, module_name):
    cls.__module__ = module_name
    cls.__qualname__ = cls.__name__
    setattr(module(module_name), cls.__name__, cls)
    return cls


class ByValue(str, enum.Enum):
    """Pickled as cls(value), as the real files hold them (Python 3.11's default is getattr(cls, name))."""

    def __reduce_ex__(self, protocol):
        return self.__class__, (self._value_,)


def str_enum(name, module_name, values):
    return place(ByValue(name, {v.upper(): v for v in values}), module_name)


IntervalStrategy = str_enum("IntervalStrategy", "transformers.trainer_utils", ["no", "steps", "epoch"])
SaveStrategy = str_enum("SaveStrategy", "transformers.trainer_utils", ["no", "steps", "epoch", "best"])
SchedulerType = str_enum("SchedulerType", "transformers.trainer_utils", ["linear", "cosine"])
HubStrategy = str_enum("HubStrategy", "transformers.trainer_utils", ["end", "every_save", "checkpoint"])
OptimizerNames = str_enum("OptimizerNames", "transformers.training_args",
                          ["adamw_hf", "adamw_torch", "adamw_torch_fused"])
DistributedType = str_enum("DistributedType", "accelerate.utils.dataclasses", ["NO", "MULTI_GPU"])


@dataclasses.dataclass
class TrainingArguments:
    output_dir: str = "out"


@dataclasses.dataclass
class AcceleratorConfig:
    split_batches: bool = False


class PartialState:
    pass


@dataclasses.dataclass
class Seq2SeqTrainingArguments(TrainingArguments):
    pass


@dataclasses.dataclass
class SFTConfig(TrainingArguments):
    pass


place(TrainingArguments, "transformers.training_args")
place(Seq2SeqTrainingArguments, "transformers.training_args_seq2seq")
place(SFTConfig, "trl.trainer.sft_config")
ERAS = {"cached_devices": TrainingArguments, "partial_state": TrainingArguments,
        "accelerator_config": TrainingArguments, "save_strategy": TrainingArguments,
        "seq2seq": Seq2SeqTrainingArguments, "sft_config": SFTConfig}
place(AcceleratorConfig, "transformers.trainer_pt_utils")
place(PartialState, "accelerate.state")


def common_fields(era):
    strategy = "evaluation_strategy" if era == "cached_devices" else "eval_strategy"
    return {
        "output_dir": "./out", "overwrite_output_dir": False, "do_train": False, "do_eval": True,
        strategy: IntervalStrategy("steps"), "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1, "learning_rate": 5e-05, "weight_decay": 0.0,
        "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-08, "max_grad_norm": 1.0,
        "num_train_epochs": 3.0, "max_steps": -1, "lr_scheduler_type": SchedulerType("linear"),
        "warmup_ratio": 0.0, "log_level": "passive", "logging_dir": "./out/runs",
        "logging_strategy": IntervalStrategy("steps"), "logging_steps": 500,
        "save_strategy": (IntervalStrategy if era in ("cached_devices", "partial_state", "accelerator_config")
                          else SaveStrategy)("steps"),
        "save_steps": 500, "save_total_limit": None, "seed": 42, "fp16": False, "local_rank": 0,
        "debug": [], "fsdp": [], "deepspeed": None, "label_smoothing_factor": 0.0,
        "optim": OptimizerNames("adamw_hf" if era == "cached_devices" else "adamw_torch"),
        "report_to": [], "push_to_hub": False, "hub_strategy": HubStrategy("every_save"),
        "hub_token": None, "_n_gpu": 1,
    }


def training_args(era):
    fields = common_fields(era)
    if era == "cached_devices":
        fields["__cached__setup_devices"] = torch.device("cuda", 0)
    else:
        if era != "partial_state":
            config = AcceleratorConfig()
            config.__dict__.update({"split_batches": False, "dispatch_batches": None, "even_batches": True,
                                    "use_seedable_sampler": True, "non_blocking": False,
                                    "gradient_accumulation_kwargs": None})
            fields["accelerator_config"] = config
        state = PartialState()
        state.__dict__.update({"_cpu": False, "backend": None, "device": torch.device("cuda"),
                               "debug": False, "distributed_type": DistributedType("NO"),
                               "num_processes": 1, "process_index": 0, "local_process_index": 0,
                               "fork_launched": False})
        fields["distributed_state"] = state
        fields["__cached__setup_devices"] = torch.device("cuda", 0)
        fields["deepspeed_plugin"] = None
    args = ERAS[era]()
    args.__dict__.clear()
    args.__dict__.update(fields)
    return args


def main():
    out, era = sys.argv[1], sys.argv[2]
    if era not in ERAS:
        sys.exit(f"unknown era {era!r}")
    torch.save(training_args(era), out)


if __name__ == "__main__":
    main()
