// torch 2.6's default weights_only allowlist (torch/_weights_only_unpickler.py,
// _get_allowed_globals and _tensor_rebuild_functions), and the globals that are
// outright dangerous to call. Facts about torch's format, not its code.
#include <array>
#include <string_view>

#include "optstate/torch_objects.h"
#include "pickle/pickle_machine.h"

namespace optstate {
namespace {

constexpr std::array<std::string_view, 13> kAllowedExact = {
    "collections.OrderedDict",     "collections.Counter",
    "torch.nn.parameter.Parameter", "torch.serialization._get_layout",
    "torch.Size",                  "torch.Tensor",
    "torch.device",                "_codecs.encode",
    "builtins.bytearray",          "builtins.set",
    "builtins.complex",            "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
};

constexpr std::array<std::string_view, 13> kRebuildFunctions = {
    "_rebuild_parameter",      "_rebuild_parameter_with_state", "_rebuild_qtensor",
    "_rebuild_tensor",         "_rebuild_tensor_v2",            "_rebuild_tensor_v3",
    "_rebuild_sparse_tensor",  "_rebuild_meta_tensor_no_storage", "_rebuild_nested_tensor",
    "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy",
    "_rebuild_device_tensor_from_cpu_tensor", "_rebuild_sparse_csr_tensor",
};

constexpr std::array<std::string_view, 5> kQSchemes = {
    "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
    "per_channel_symmetric", "per_channel_affine_float_qparams",
};

// Dtype names torch 2.6 also allows beyond the ones DType models.
constexpr std::array<std::string_view, 16> kExtraDtypes = {
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32",
    "uint64",        "complex32",   "quint4x2",        "quint2x4",        "bits1x8", "bits2x4",
    "bits4x2",       "bits8",       "bits16",          "chalf",
};

// Modules any of whose callables can run code, reach the network or the
// file system, or load another pickle: the union of what picklescan,
// modelscan and fickling flag, by top-level module (a dotted name is matched
// segment by segment, so pathlib.os.system is os.system).
constexpr std::string_view kDangerousModules[] = {
    "os",        "posix",      "nt",         "subprocess", "sys",       "runpy",       "importlib", "imp",
    "zipimport", "shutil",     "socket",     "ctypes",     "pty",       "commands",    "timeit",    "cProfile",
    "profile",   "pdb",        "bdb",        "trace",      "doctest",   "pip",         "pkgutil",   "code",
    "codeop",    "marshal",    "pickle",     "_pickle",    "cPickle",   "dill",        "shelve",    "joblib",
    "webbrowser", "http",      "httplib",    "urllib",     "urllib2",   "requests",    "aiohttp",   "ftplib",
    "smtplib",   "telnetlib",  "xmlrpc",     "asyncio",    "multiprocessing", "_thread", "thread", "threading",
    "signal",    "platform",   "_posixsubprocess", "site",
};
// builtins (and __builtin__) callables that run code or open files.
constexpr std::string_view kDangerousBuiltins[] = {
    "eval",  "exec",    "compile", "__import__", "getattr",  "setattr",  "delattr", "open",    "input",  "breakpoint",
    "globals", "vars",  "locals",  "execfile",   "apply",    "reload",   "file",    "raw_input", "help",
};
// Single callables of otherwise harmless modules that the peers flag: each
// calls what it is given, builds code, or loads a file.
constexpr std::string_view kDangerousNames[] = {
    "operator.attrgetter",  "operator.methodcaller", "_operator.attrgetter", "_operator.methodcaller",
    "functools.partial",    "functools.reduce",      "_functools.partial",   "_functools.reduce",
    "types.CodeType",       "types.FunctionType",    "types.MethodType",     "torch.load",
    "torch.serialization.load", "torch.storage._load_from_bytes", "torch.jit.load", "torch._C._load_for_lite_interpreter",
    "numpy.load",           "numpy.testing._private.utils.runstring", "io.open", "_io.open",
    "_io.FileIO",           "io.FileIO",
};
constexpr std::string_view kDangerousPrefixes[] = {"torch.hub.", "torch._inductor.codecache."};

// Classes healthy checkpoints are known to call when loaded with
// weights_only=False, outside torch 2.6's allowlist: data reconstruction
// (numpy arrays, dtypes and RNG states, containers, paths, dates, numbers,
// BytesIO) and framework objects seen in real saves (DeepSpeed's loss scaler,
// stage enum and fragment addresses; FSDP2 + TP's _StridedShard). Calling
// them builds data and runs nothing else; they stay warnings under the
// default-deny rule, which any other called global fails.
constexpr std::string_view kKnownDataClasses[] = {
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.random._pickle.__randomstate_ctor",
    "numpy.random._pickle.__bit_generator_ctor", "numpy.random._pickle.__generator_ctor",
    "numpy.random.mtrand.RandomState", "collections.defaultdict", "collections.deque", "argparse.Namespace",
    "decimal.Decimal", "fractions.Fraction", "datetime.datetime", "datetime.date", "datetime.time",
    "datetime.timedelta", "datetime.timezone", "builtins.slice", "builtins.range", "builtins.frozenset",
    "builtins.object", "copyreg._reconstructor",
    // Builtins that only build a value from their arguments (what a pickle of
    // plain data reaches for outside torch's allowlist).
    "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.int", "builtins.float",
    "builtins.complex", "builtins.str", "builtins.bytes", "builtins.bool", "builtins.len",
    // What a DCP .metadata pickles (torch 2.6), and Python 3.13's home of PosixPath.
    "torch.distributed.checkpoint.metadata.Metadata", "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata", "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta", "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING", "torch.distributed.checkpoint.filesystem._StorageInfo",
    "pathlib._local.PosixPath", "_io.BytesIO", "io.BytesIO", "pathlib.PosixPath",
    "pathlib.PurePosixPath", "pathlib.WindowsPath", "pathlib.PureWindowsPath", "uuid.UUID",
    "torch.distributed.tensor.placement_types._StridedShard", "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.zero.config.ZeroStageEnum", "deepspeed.utils.tensor_fragment.fragment_address",
    // torch.optim's optimizers and schedulers, pickled whole when a scheduler's
    // state dict holds a bound method (torch 1.13's OneCycleLR): __setstate__
    // only updates __dict__. Module paths as torch 1.13 and 2.6 define them.
    "torch.optim.adadelta.Adadelta", "torch.optim._adafactor.Adafactor", "torch.optim.adagrad.Adagrad",
    "torch.optim.adam.Adam", "torch.optim.adamax.Adamax", "torch.optim.adamw.AdamW", "torch.optim.asgd.ASGD",
    "torch.optim.lbfgs.LBFGS", "torch.optim.nadam.NAdam", "torch.optim.radam.RAdam", "torch.optim.rmsprop.RMSprop",
    "torch.optim.rprop.Rprop", "torch.optim.sgd.SGD", "torch.optim.sparse_adam.SparseAdam",
    "torch.optim.lr_scheduler.ChainedScheduler", "torch.optim.lr_scheduler.ConstantLR",
    "torch.optim.lr_scheduler.CosineAnnealingLR", "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts",
    "torch.optim.lr_scheduler.CyclicLR", "torch.optim.lr_scheduler.ExponentialLR", "torch.optim.lr_scheduler.LambdaLR",
    "torch.optim.lr_scheduler.LinearLR", "torch.optim.lr_scheduler.MultiStepLR",
    "torch.optim.lr_scheduler.MultiplicativeLR", "torch.optim.lr_scheduler.OneCycleLR",
    "torch.optim.lr_scheduler.PolynomialLR", "torch.optim.lr_scheduler.ReduceLROnPlateau",
    "torch.optim.lr_scheduler.SequentialLR", "torch.optim.lr_scheduler.StepLR", "torch.optim.swa_utils.SWALR",
    "torch.optim.swa_utils.AveragedModel",
    // FSDP1's SHARDED_STATE_DICT and LOCAL_STATE_DICT (torch 2.6's FSDP1 default for
    // sharded saves): ShardedTensor and its metadata, as torch 2.6 pickles them.
    "torch.distributed._shard.sharded_tensor.api.ShardedTensor", "torch.distributed._shard.sharded_tensor.shard.Shard",
    "torch.distributed._shard.metadata.ShardMetadata", "torch.distributed._shard.sharded_tensor.metadata.ShardedTensorMetadata",
    "torch.distributed._shard.sharded_tensor.metadata.TensorProperties",
    "torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING",
    "torch.distributed._shard.sharding_spec.chunk_sharding_spec.ChunkShardingSpec",
    "torch.distributed.remote_device._remote_device",
    // HF Trainer's training_args.bin, as real files of transformers 4.2x-4.5x, TRL's SFTTrainer
    // and Seq2SeqTrainer hold it: the arguments are dataclasses (NEWOBJ + BUILD of their
    // __dict__), the strategies str enums looked up by value, accelerate's PartialState a plain
    // object whose __dict__ is restored (testdata/frameworks/hf_training_args/real_files.json).
    "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    "trl.trainer.sft_config.SFTConfig", "transformers.training_args.OptimizerNames",
    "transformers.trainer_utils.IntervalStrategy", "transformers.trainer_utils.SaveStrategy",
    "transformers.trainer_utils.SchedulerType", "transformers.trainer_utils.HubStrategy",
    "transformers.trainer_pt_utils.AcceleratorConfig", "accelerate.state.PartialState",
    "accelerate.utils.dataclasses.DistributedType",
};

bool IsDtypeName(std::string_view name) {
  if (DTypeFromName(name)) return true;
  for (std::string_view d : kExtraDtypes) {
    if (d == name) return true;
  }
  return false;
}

}  // namespace

bool IsWeightsOnlyAllowed(std::string_view module_in, std::string_view name) {
  std::string_view module = NormalizeModule(module_in);
  std::string full;
  full.append(module).append(".").append(name);
  for (std::string_view a : kAllowedExact) {
    if (a == full) return true;
  }
  if (module == "torch._utils") {
    for (std::string_view f : kRebuildFunctions) {
      if (f == name) return true;
    }
  }
  if (module == "torch._tensor" && name == "_rebuild_from_type_v2") return true;
  if (module == "torch") {
    if (IsDtypeName(name)) return true;
    if (name.ends_with("Storage") || name.ends_with("Tensor")) return true;  // legacy classes
    for (std::string_view q : kQSchemes) {
      if (q == name) return true;
    }
  }
  if (module == "torch.cuda" && name.ends_with("Tensor")) return true;
  return false;
}

bool IsAllowedOnceDistributedTensorImported(std::string_view module, std::string_view name) {
  // Listed by torch.serialization.get_safe_globals() after the import, torch 2.6.0.
  return (module == "torch.distributed.tensor" && name == "DTensor") ||
         (module == "torch.distributed.device_mesh" && name == "DeviceMesh") ||
         (module == "torch.distributed.tensor._dtensor_spec" && (name == "DTensorSpec" || name == "TensorMeta")) ||
         (module == "torch.distributed.tensor.placement_types" &&
          (name == "Shard" || name == "Replicate" || name == "Partial"));
}

bool ImportRunsCode(std::string_view module_in) {
  const std::string_view module = NormalizeModule(module_in);
  if (module == "__main__" || module.ends_with(".__main__")) return true;
  for (std::string_view m : {"this", "antigravity", "idlelib.idle", "idlelib.__main__", "turtledemo.__main__"}) {
    if (module == m) return true;
  }
  return false;
}

bool IsDangerousGlobal(std::string_view module_in, std::string_view name) {
  const std::string_view module = NormalizeModule(module_in);
  std::string full(module);
  full.append(".").append(name);
  for (std::string_view n : kDangerousNames) {
    if (full == n || (full.starts_with(n) && full[n.size()] == '.')) return true;
  }
  for (std::string_view p : kDangerousPrefixes) {
    if (full.starts_with(p)) return true;
  }
  auto dangerous_module = [](std::string_view m) {
    std::string_view top = NormalizeModule(m);
    top = top.substr(0, top.find('.'));
    for (std::string_view d : kDangerousModules) {
      if (d == top) return true;
    }
    return false;
  };
  if (dangerous_module(module.substr(0, module.find('.')))) return true;
  // The name is an attribute path (STACK_GLOBAL resolves dots with getattr):
  // a segment that is a dangerous module re-exported (pathlib.os.system,
  // torch.serialization.os.system) or a dangerous builtin reached from
  // builtins (builtins.eval.__call__) marks it. The module path itself names
  // real modules (torch.multiprocessing is torch's, not the stdlib's).
  bool from_builtins = module == "builtins";
  std::string_view rest = name;
  for (bool first = true; !rest.empty(); first = false) {
    size_t dot = rest.find('.');
    std::string_view seg = rest.substr(0, dot);
    if (!first && dangerous_module(seg)) return true;
    if (first && dot != std::string_view::npos && dangerous_module(seg)) return true;
    if (from_builtins) {
      for (std::string_view b : kDangerousBuiltins) {
        if (b == seg) return true;
      }
    }
    from_builtins = seg == "builtins" || seg == "__builtins__";
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  return false;
}

bool IsKnownDataClass(std::string_view module, std::string_view name) {
  std::string full(NormalizeModule(module));
  full.append(".").append(name);
  // torch.save(model) pickles the torch.nn classes themselves: Module's
  // __setstate__ only restores __dict__ (and the defaults of attributes newer
  // versions added), the most common way people save a model.
  if (full.starts_with("torch.nn.modules.")) return true;
  for (std::string_view k : kKnownDataClasses) {
    if (k == full) return true;
  }
  return false;
}

}  // namespace optstate

namespace optstate {

std::vector<std::string> OpcodesWeightsOnlyRefuses(const std::bitset<256>& used) {
  // The opcodes torch/_weights_only_unpickler.py (2.6) dispatches on; any
  // other raises "Unsupported operand <n>".
  static constexpr uint8_t kAccepted[] = {
      0x80 /*PROTO*/,     '.' /*STOP*/,       '(' /*MARK*/,        'c' /*GLOBAL*/,       'R' /*REDUCE*/,
      0x81 /*NEWOBJ*/,    'b' /*BUILD*/,      'Q' /*BINPERSID*/,   '}' /*EMPTY_DICT*/,   ']' /*EMPTY_LIST*/,
      ')' /*EMPTY_TUPLE*/, 0x8f /*EMPTY_SET*/, 's' /*SETITEM*/,    'u' /*SETITEMS*/,     'a' /*APPEND*/,
      'e' /*APPENDS*/,    't' /*TUPLE*/,      0x85 /*TUPLE1*/,     0x86 /*TUPLE2*/,      0x87 /*TUPLE3*/,
      'N' /*NONE*/,       0x88 /*NEWTRUE*/,   0x89 /*NEWFALSE*/,   'J' /*BININT*/,       'K' /*BININT1*/,
      'M' /*BININT2*/,    0x8a /*LONG1*/,     'G' /*BINFLOAT*/,    'X' /*BINUNICODE*/,   'U' /*SHORT_BINSTRING*/,
      'h' /*BINGET*/,     'j' /*LONG_BINGET*/, 'q' /*BINPUT*/,     'r' /*LONG_BINPUT*/};
  std::bitset<256> refused = used;
  for (uint8_t op : kAccepted) refused.reset(op);
  std::vector<std::string> out;
  // Named where a pickle of protocol 3 to 5 (what users pass to torch.save) has them.
  static constexpr std::pair<uint8_t, const char*> kNames[] = {
      {'B', "BINBYTES"},       {'C', "SHORT_BINBYTES"},  {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"},
      {0x8e, "BINBYTES8"},     {0x90, "ADDITEMS"},       {0x91, "FROZENSET"},        {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"},  {0x94, "MEMOIZE"},        {0x95, "FRAME"},            {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"},   {0x98, "READONLY_BUFFER"}};
  for (size_t op = 0; op < 256; ++op) {
    if (!refused.test(op)) continue;
    std::string name = pickle_internal::OpName(static_cast<uint8_t>(op));
    for (auto [code, text] : kNames) {
      if (code == op) name = std::string(text) + " " + name;
    }
    out.push_back(name);
  }
  return out;
}

}  // namespace optstate
