// Realistic optimizer checkpoints without Python: K fused steps of torch.optim's
// AdamW (or Adam, SGD, Adagrad, RMSprop: optimizer.h) with
// seeded synthetic gradients on a list of parameters, written in the key
// scheme asked for, including the broken layouts optstate exists to repair.
//
// Values are a pure function of (seed, parameter index, step), so a checkpoint
// is reproducible, and tensors are computed one parameter (or one FSDP
// collision group) at a time while the file is written: memory stays bounded
// by the largest parameter, not the model.
#ifndef OPTSTATE_REGENERATE_H_
#define OPTSTATE_REGENERATE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optstate/optimizer.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/params.h"

namespace optstate {

enum class KeyScheme {
  kIndex,        // 0, 1, ...: torch.optim
  kFqn,          // "layers.0.w": DCP / DSD
  kStringIndex,  // "0", "1", ...: after a DCP round trip
  kPtrShape,     // (data_ptr, shape): HeavyBall 0.12.3-0.24, split views included
  kPtrShapeFsdp, // (0, shape): every pointer 0, same-shape parameters share one merged entry
};
// "index", "fqn", "string-index", "ptr-shape", "ptr-shape-fsdp".
std::string_view KeySchemeName(KeyScheme scheme);
std::optional<KeyScheme> KeySchemeFromName(std::string_view name);

struct RegenerateOptions {
  int steps = 3;
  uint64_t seed = 0;
  Algorithm algorithm = Algorithm::kAdamW;
  // Its hyperparameters; written into the param group as torch 2.6 writes that class's.
  OptimizerHyper hyper = OptimizerHyper::Defaults(Algorithm::kAdamW);
  KeyScheme scheme = KeyScheme::kIndex;
  int64_t split_rows = 0;     // ptr-shape: parameters with more rows are split on dim 0 into views
  bool with_model = false;    // {"model": state_dict, "optimizer": ...} instead of the optimizer alone
  AdamWOptions kernel;
  WriteOptions write;
  // The starting values of parameter i (numel floats), e.g. a model's weights;
  // without it they are synthetic.
  std::function<StatusOr<std::vector<float>>(size_t param)> initial_values;
  // Called as records are written: bytes of tensor data done and in all.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct RegenerateReport {
  size_t params = 0;
  size_t state_entries = 0;
  uint64_t param_bytes = 0;   // of the parameters (their own dtype)
  uint64_t state_bytes = 0;   // of all state tensors written
  std::vector<ParamInfo> manifest;  // the parameters with the data_ptr their keys use (ptr-shape)
  WriteReport write;
};

// `params` need name, shape and dtype (float32, bfloat16 or float16); with
// kPtrShape their data_ptr is used when given, else addresses are laid out as
// an allocator would (64-byte aligned, in order).
StatusOr<RegenerateReport> Regenerate(const std::vector<ParamInfo>& params, const RegenerateOptions& options,
                                      const std::string& out_path);

// A transformer-like model of float32 parameters totalling about `bytes`
// (embedding, per-layer attention and MLP weights, norms and biases; several
// share a shape, as in real models). At least one layer.
std::vector<ParamInfo> SyntheticParams(uint64_t bytes);

// "4GiB", "512MiB", "10MB", "123": a size in bytes. kInvalidArgument otherwise.
StatusOr<uint64_t> ParseSize(std::string_view text);

}  // namespace optstate

#endif  // OPTSTATE_REGENERATE_H_
