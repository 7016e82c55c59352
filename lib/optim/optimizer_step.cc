// OptimizerStep: the family's front door. Checks tensors and hyperparameters
// as torch's constructors do, computes each tensor's per-step scalars, and
// hands chunks of work to the loop built for the best instruction set (Adam
// and AdamW go to adamw.cc's kernel, the rest to family_kernel.h's).
#include "optstate/optimizer.h"

#include <algorithm>
#include <vector>

#include "io/parallel_for.h"
#include "optim/family_kernel.h"
#include "optim/optimizer_checks.h"

namespace optstate {
namespace {

using optim::FamilyAlgorithm;
using optim::FamilyChunk;
using optim::FamilyScalars;

constexpr int64_t kChunkElements = 1 << 16;    // as adamw.cc
constexpr int64_t kThreadedElements = 1 << 18;

// The scalars of one step of one tensor; Adagrad and RMSprop count the step first.
FamilyScalars FamilyScalarsFor(Algorithm a, const OptimizerHyper& h, const OptimizerTensor& t) {
  FamilyScalars s{};
  s.grad_sign = h.maximize ? -1.0f : 1.0f;
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.decay = h.weight_decay != 0;
  s.use_momentum = a == Algorithm::kSgd ? h.momentum != 0 : h.momentum > 0;
  s.momentum = static_cast<float>(h.momentum);
  s.one_minus_dampening = static_cast<float>(1 - h.dampening);
  s.nesterov = h.nesterov;
  s.fresh_buffer = t.fresh_momentum_buffer;
  s.neg_lr = static_cast<float>(-h.lr);
  s.eps = static_cast<float>(h.eps);
  s.alpha = static_cast<float>(h.alpha);
  s.one_minus_alpha = static_cast<float>(1 - h.alpha);
  s.centered = h.centered;
  if (a == Algorithm::kAdagrad) {
    double step = *t.step;  // torch: step_t.item(), after the increment
    s.neg_lr = static_cast<float>(-(h.lr / (1 + (step - 1) * h.lr_decay)));
  }
  return s;
}

}  // namespace

Status OptimizerStep(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h,
                     const AdamWOptions& options) {
  if (a == Algorithm::kAdamW || a == Algorithm::kAdam) {
    return AdamWStep(AsAdamWTensors(tensors), AsAdamWHyper(a, h), options);
  }
  OPTSTATE_RETURN_IF_ERROR(CheckOptimizerTensors(a, tensors, h));
  Isa best = DetectIsa();
  Isa isa = options.isa == Isa::kAuto ? best : options.isa;
  if (static_cast<int>(isa) > static_cast<int>(best)) {
    return UnsupportedError("this CPU cannot run the " + std::string(IsaName(isa)) + " kernel (best: " +
                            std::string(IsaName(best)) + ")");
  }
  const FamilyAlgorithm fa = a == Algorithm::kSgd       ? FamilyAlgorithm::kSgd
                             : a == Algorithm::kAdagrad ? FamilyAlgorithm::kAdagrad
                                                        : FamilyAlgorithm::kRmsprop;
  const std::vector<StateSlot> slots = StateSlots(a, h);
  std::vector<FamilyChunk> chunks;
  int64_t total = 0;
  for (const OptimizerTensor& t : tensors) {
    if (t.step != nullptr && KeepsStep(a)) *t.step += 1;
    FamilyScalars s = FamilyScalarsFor(a, h, t);
    float* state[3];
    for (size_t k = 0; k < 3; ++k) state[k] = k < slots.size() && slots[k].kept ? t.state[k] : nullptr;
    for (int64_t at = 0; at < t.numel; at += kChunkElements) {
      chunks.push_back(FamilyChunk{fa, t.param, t.grad, {state[0], state[1], state[2]}, *optim::ParamTypeOf(t.dtype), at,
                                   std::min(t.numel, at + kChunkElements), s});
    }
    total += t.numel;
  }
  void (*run)(const FamilyChunk&) = isa == Isa::kAvx512 ? optim::RunFamilyChunkAvx512
                                    : isa == Isa::kAvx2 ? optim::RunFamilyChunkAvx2
                                                        : optim::RunFamilyChunkGeneric;
  ParallelFor(chunks.size(), total < kThreadedElements ? 1 : options.threads, [&](size_t i) { run(chunks[i]); });
  return Status();
}

}  // namespace optstate
