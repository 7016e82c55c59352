// torch 2.6's default weights_only allowlist (torch/_weights_only_unpickler.py,
// _get_allowed_globals and _tensor_rebuild_functions), and the globals that are
// outright dangerous to call. Facts about torch's format, not its code.
#include <array>
#include <string_view>

#include "optstate/dtype.h"
#include "optstate/torch_objects.h"

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

constexpr std::array<std::string_view, 12> kDangerousModules = {
    "os", "posix", "nt", "subprocess", "sys", "runpy", "importlib", "shutil", "socket",
    "ctypes", "pty", "commands",
};
constexpr std::array<std::string_view, 12> kDangerousBuiltins = {
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "open",
    "input", "breakpoint", "globals", "vars",
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

bool IsDangerousGlobal(std::string_view module_in, std::string_view name) {
  std::string_view module = NormalizeModule(module_in);
  std::string_view top = module.substr(0, module.find('.'));
  for (std::string_view m : kDangerousModules) {
    if (m == top) return true;
  }
  if (module == "builtins") {
    for (std::string_view b : kDangerousBuiltins) {
      if (b == name) return true;
    }
  }
  return module == "pickle" || module == "_pickle" || module == "marshal" || module == "code" ||
         module == "codeop" || (module == "torch" && name == "load");
}

}  // namespace optstate
