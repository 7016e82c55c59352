// AdamWStep: checks, the per-tensor scalars, and the work split into chunks
// that threads take in turn; the loops themselves are in adamw_kernel.h.
#include "optstate/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/parallel_for.h"
#include "optim/adamw_kernel.h"

namespace optstate {
namespace {

using optim::Chunk;
using optim::ParamType;

// Large enough that a thread's share is not eaten by handing it out, small
// enough that two threads split a single large tensor evenly.
constexpr int64_t kChunkElements = 1 << 16;
// Below this many elements in all, threads cost more than they give.
constexpr int64_t kThreadedElements = 1 << 18;

StatusOr<ParamType> TypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ParamType::kFloat32;
    case DType::kBFloat16: return ParamType::kBFloat16;
    case DType::kFloat16: return ParamType::kFloat16;
    default:
      return InvalidArgumentError("AdamW parameters must be float32, bfloat16 or float16, not " +
                                  std::string(GetDTypeInfo(dtype).name));
  }
}

Status CheckHyper(const AdamWHyper& h) {
  // The same bounds torch.optim.AdamW's constructor enforces.
  if (!(h.lr >= 0)) return InvalidArgumentError("invalid learning rate: " + std::to_string(h.lr));
  if (!(h.eps >= 0)) return InvalidArgumentError("invalid epsilon value: " + std::to_string(h.eps));
  if (!(h.beta1 >= 0 && h.beta1 < 1)) return InvalidArgumentError("invalid beta1: " + std::to_string(h.beta1));
  if (!(h.beta2 >= 0 && h.beta2 < 1)) return InvalidArgumentError("invalid beta2: " + std::to_string(h.beta2));
  if (!(h.weight_decay >= 0)) {
    return InvalidArgumentError("invalid weight_decay value: " + std::to_string(h.weight_decay));
  }
  return Status();
}

Status CheckTensor(const AdamWTensor& t, size_t i, const AdamWHyper& h) {
  std::string where = "tensor " + std::to_string(i) + ": ";
  if (t.numel < 0) return InvalidArgumentError(where + "negative numel");
  if (t.step == nullptr) return InvalidArgumentError(where + "no step counter");
  if (t.numel > 0 && (t.param == nullptr || t.exp_avg == nullptr || t.exp_avg_sq == nullptr)) {
    return InvalidArgumentError(where + "param, exp_avg and exp_avg_sq are required");
  }
  if (h.amsgrad && t.numel > 0 && t.max_exp_avg_sq == nullptr) {
    return InvalidArgumentError(where + "amsgrad needs max_exp_avg_sq");
  }
  return TypeOf(t.dtype).status();
}

// torch increments the 0-d float32 step, then reads it back as a Python float.
optim::StepScalars Scalars(const AdamWHyper& h, float step) {
  double bc1 = 1 - std::pow(h.beta1, static_cast<double>(step));
  double bc2 = 1 - std::pow(h.beta2, static_cast<double>(step));
  optim::StepScalars s;
  s.decay = h.decoupled_weight_decay ? static_cast<float>(1 - h.lr * h.weight_decay) : 1.0f;
  s.l2 = h.decoupled_weight_decay ? 0.0f : static_cast<float>(h.weight_decay);
  s.one_minus_beta1 = static_cast<float>(1 - h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.one_minus_beta2 = static_cast<float>(1 - h.beta2);
  s.neg_step_size = static_cast<float>(-(h.lr / bc1));
  s.inv_bias_correction2_sqrt = static_cast<float>(1 / std::sqrt(bc2));
  s.eps = static_cast<float>(h.eps);
  s.amsgrad = h.amsgrad;
  s.maximize = h.maximize;
  return s;
}

using ChunkFn = void (*)(const Chunk&);

ChunkFn KernelFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return optim::RunChunkAvx512;
    case Isa::kAvx2: return optim::RunChunkAvx2;
    default: return optim::RunChunkGeneric;
  }
}


}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAuto: return "auto";
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "generic";
}

Isa DetectIsa() {
  // Asked on every step (regenerate steps each parameter separately): answer once.
  static const Isa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
      return Isa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
      return Isa::kAvx2;
    }
    return Isa::kGeneric;
  }();
  return best;
}

Status AdamWStep(std::span<const AdamWTensor> tensors, const AdamWHyper& hyper, const AdamWOptions& options) {
  OPTSTATE_RETURN_IF_ERROR(CheckHyper(hyper));
  for (size_t i = 0; i < tensors.size(); ++i) OPTSTATE_RETURN_IF_ERROR(CheckTensor(tensors[i], i, hyper));
  Isa best = DetectIsa();
  Isa isa = options.isa == Isa::kAuto ? best : options.isa;
  if (static_cast<int>(isa) > static_cast<int>(best)) {
    return UnsupportedError("this CPU cannot run the " + std::string(IsaName(isa)) + " kernel (best: " +
                            std::string(IsaName(best)) + ")");
  }
  std::vector<Chunk> chunks;
  int64_t total = 0;
  for (const AdamWTensor& t : tensors) {
    *t.step += 1;
    optim::StepScalars s = Scalars(hyper, *t.step);
    ParamType type = *TypeOf(t.dtype);
    for (int64_t at = 0; at < t.numel; at += kChunkElements) {
      chunks.push_back(Chunk{t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, type, at,
                             std::min(t.numel, at + kChunkElements), s});
    }
    total += t.numel;
  }
  ChunkFn run = KernelFor(isa);
  ParallelFor(chunks.size(), total < kThreadedElements ? 1 : options.threads, [&](size_t i) { run(chunks[i]); });
  return Status();
}

Status AdamWInitState(std::span<const AdamWTensor> tensors, const AdamWHyper& hyper, const AdamWOptions& options) {
  std::vector<AdamWTensor> fresh(tensors.begin(), tensors.end());
  for (AdamWTensor& t : fresh) {
    if (t.step == nullptr || t.numel < 0) return InvalidArgumentError("AdamW state needs a step counter");
    *t.step = 0;
    if (t.numel > 0 && t.exp_avg != nullptr) std::fill_n(t.exp_avg, t.numel, 0.0f);
    if (t.numel > 0 && t.exp_avg_sq != nullptr) std::fill_n(t.exp_avg_sq, t.numel, 0.0f);
    if (t.numel > 0 && t.max_exp_avg_sq != nullptr) std::fill_n(t.max_exp_avg_sq, t.numel, 0.0f);
    t.grad = nullptr;  // a zero gradient
  }
  AdamWHyper at_zero = hyper;
  at_zero.lr = 0;  // for this one call only: nothing is kept per parameter
  return AdamWStep(fresh, at_zero, options);
}

}  // namespace optstate
