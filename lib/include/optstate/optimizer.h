// The fused-kernel optimizer: torch.optim's SGD, Adam, AdamW, Adagrad and
// RMSprop steps on raw memory, each beside a scalar reference.
#ifndef OPTSTATE_OPTIMIZER_H_
#define OPTSTATE_OPTIMIZER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/dtype.h"
#include "optstate/status.h"

namespace optstate {

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

// The fused-kernel family: one step of torch.optim's SGD, Adam, AdamW, Adagrad
// and RMSprop, each vectorised (AVX2 / AVX-512, chosen at run time, spread
// over threads) beside a plain scalar reference that it matches bit for bit.
// They follow torch's single-tensor algorithms (what torch runs on CPU):
//
//   every algorithm:  g = maximize ? -grad : grad
//   SGD      g += wd * p;  momentum: buf = fresh ? g : buf * momentum + (1 - dampening) * g,
//                          g = nesterov ? g + momentum * buf : buf;  p += -lr * g
//   Adam     g += wd * p, then AdamW's moments and update without decoupled decay
//   AdamW    see AdamW above
//   Adagrad  step += 1;  g += wd * p;  sum += g * g;
//            p += (-lr / (1 + (step - 1) * lr_decay)) * g / (sqrt(sum) + eps)
//   RMSprop  step += 1;  g += wd * p;  sq = sq * alpha + (1 - alpha) * g * g;
//            centered: ga = lerp(ga, g, 1 - alpha), avg = sqrt(sq - ga * ga), else avg = sqrt(sq);
//            avg += eps;  momentum: buf = buf * momentum + g / avg, p += -lr * buf;
//            else p += (-lr * g) / avg
//
// Scalars are rounded to float once, as Python numbers meeting float32 tensors
// are; no FMA contraction. torch's vectorised ATen kernels fuse some of these
// (add with alpha, lerp) into FMAs, so results are within a few ulps of torch,
// not bit-identical: the parity tests bound the distance on torch's own
// trajectories (testdata/gen/gen_optimizer_parity.py). State is float32 for
// every parameter dtype (float32, bfloat16, float16).

enum class Algorithm { kAdamW, kAdam, kSgd, kAdagrad, kRmsprop };
std::string_view AlgorithmName(Algorithm a);  // "adamw", "adam", "sgd", "adagrad", "rmsprop"
std::optional<Algorithm> AlgorithmFromName(std::string_view name);

// Every algorithm's hyperparameters; each reads only its own. Defaults() gives
// torch.optim's constructor defaults (SGD's lr, required in torch, is 1e-3).
struct OptimizerHyper {
  double lr = 1e-3;
  double weight_decay = 0;
  bool maximize = false;
  double eps = 1e-8;                 // Adam(W), Adagrad (1e-10 by default), RMSprop
  double beta1 = 0.9, beta2 = 0.999;  // Adam(W)
  bool amsgrad = false;              // Adam(W)
  double momentum = 0;               // SGD, RMSprop
  double dampening = 0;              // SGD
  bool nesterov = false;             // SGD
  double lr_decay = 0;               // Adagrad
  double initial_accumulator_value = 0;  // Adagrad: where `sum` starts
  double alpha = 0.99;               // RMSprop
  bool centered = false;             // RMSprop

  static OptimizerHyper Defaults(Algorithm a);
  AdamWHyper ToAdamW() const;
};

// The float32 state tensors an algorithm keeps, by torch's names, as fixed
// slots of OptimizerTensor::state: Adam(W) {exp_avg, exp_avg_sq,
// max_exp_avg_sq (amsgrad)}; SGD {momentum_buffer (momentum != 0)}; Adagrad
// {sum}; RMSprop {square_avg, momentum_buffer (momentum > 0), grad_avg
// (centered)}. A slot not kept under `h` is nullptr.
struct StateSlot {
  std::string name;
  bool kept = false;
};
std::vector<StateSlot> StateSlots(Algorithm a, const OptimizerHyper& h);
// Whether the algorithm keeps a per-parameter `step` (SGD does not).
bool KeepsStep(Algorithm a);

struct OptimizerTensor {
  void* param = nullptr;
  const void* grad = nullptr;  // nullptr: a zero gradient
  DType dtype = DType::kFloat32;
  float* state[3] = {nullptr, nullptr, nullptr};  // StateSlots order
  float* step = nullptr;       // required unless SGD
  // SGD with momentum: torch creates the buffer on the first step as a copy of
  // the (decayed) gradient. true: state[0] is written, not read, this step.
  bool fresh_momentum_buffer = false;
  int64_t numel = 0;
};

// kInvalidArgument for a missing pointer, an unsupported dtype, or
// hyperparameters torch's constructors reject (also SGD's nesterov without
// momentum or with dampening); kUnsupported for an ISA this CPU lacks.
Status OptimizerStep(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h,
                     const AdamWOptions& options = {});
Status OptimizerStepReference(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h);

// Fresh state as torch creates it before the first step: zeros, Adagrad's
// sum at initial_accumulator_value, step 0. SGD's buffer is marked fresh.
void InitOptimizerState(Algorithm a, const OptimizerHyper& h, OptimizerTensor& t);

}  // namespace optstate

#endif  // OPTSTATE_OPTIMIZER_H_
