// AdamW with torch.optim.AdamW's semantics (and Adam's, with
// decoupled_weight_decay false), fused: one pass over memory per
// element (read param, grad, exp_avg, exp_avg_sq; write param, exp_avg,
// exp_avg_sq; plus max_exp_avg_sq with amsgrad), vectorised for AVX2 and
// AVX-512 with the choice made at run time, and spread over threads across and
// within tensors. AdamWStepReference is the plain scalar loop the fast path is
// tested against: both give bit-identical results (same operations in the same
// order, no FMA contraction).
//
// Per element, with g = -grad when maximize:
//   param      *= 1 - lr * weight_decay                    (decoupled decay)
//   exp_avg     = exp_avg + (1 - beta1) * (g - exp_avg)     (torch's lerp, weight < 0.5)
//   exp_avg_sq  = exp_avg_sq * beta2 + (1 - beta2) * g * g
//   v           = amsgrad ? (max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq)) : exp_avg_sq
//   param      -= lr / (1 - beta1^step) * exp_avg / (sqrt(v) * (1 / sqrt(1 - beta2^step)) + eps)
// (torch divides by sqrt(1 - beta2^step); the reciprocal saves a division per
// element and differs by at most an ulp).
// with `step` (a 0-d float32, as torch stores it) incremented first. The
// per-step scalars are computed in double, as torch computes them in Python.
// Hyperparameters come from the call, never from copies kept per parameter,
// so a step at lr=0 (DCP's state initialisation) cannot freeze anything.
#ifndef OPTSTATE_ADAMW_H_
#define OPTSTATE_ADAMW_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "optstate/dtype.h"
#include "optstate/status.h"

namespace optstate {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  // false: torch.optim.Adam's coupled (L2) decay: g += weight_decay * param
  // before the moments, and no param *= 1 - lr * weight_decay.
  bool decoupled_weight_decay = true;
};

// One parameter and its state, as raw memory. `param` and `grad` are float32,
// bfloat16 or float16 (both the same dtype); the state is always float32, so
// low-precision parameters keep full-precision moments.
struct AdamWTensor {
  void* param = nullptr;
  const void* grad = nullptr;  // nullptr: a zero gradient
  DType dtype = DType::kFloat32;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  float* max_exp_avg_sq = nullptr;  // required with amsgrad
  float* step = nullptr;            // 0-d float32 counter
  int64_t numel = 0;
};

enum class Isa { kAuto, kGeneric, kAvx2, kAvx512 };
std::string_view IsaName(Isa isa);  // "auto", "generic", "avx2", "avx512"
// The best this CPU runs: kAvx512 (F, BW, VL), kAvx2 (with FMA and F16C) or kGeneric (x86-64 baseline).
Isa DetectIsa();

struct AdamWOptions {
  int threads = 0;     // 0: every hardware thread
  Isa isa = Isa::kAuto;  // kAuto: DetectIsa(); asking for more than the CPU has is an error
};

// kInvalidArgument for null pointers, a dtype other than float32/bfloat16/
// float16, amsgrad without max_exp_avg_sq, or hyperparameters torch rejects
// (lr, eps, weight_decay < 0; betas outside [0, 1)); kUnsupported for an ISA
// this CPU lacks.
Status AdamWStep(std::span<const AdamWTensor> tensors, const AdamWHyper& hyper, const AdamWOptions& options = {});
Status AdamWStepReference(std::span<const AdamWTensor> tensors, const AdamWHyper& hyper);

// What torch.distributed.checkpoint.state_dict does to create optimizer state:
// zero gradients, one step at lr=0. Moments start at zero and `step` ends at 1;
// parameters are left bit-for-bit unchanged. The tensors' `grad` is ignored.
Status AdamWInitState(std::span<const AdamWTensor> tensors, const AdamWHyper& hyper, const AdamWOptions& options = {});

}  // namespace optstate

#endif  // OPTSTATE_ADAMW_H_
