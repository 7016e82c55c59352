// The fused-kernel family: one step of torch.optim's SGD, Adam, AdamW, Adagrad
// and RMSprop, each vectorised (AVX2 / AVX-512, chosen at run time, spread
// over threads) beside a plain scalar reference that it matches bit for bit.
// They follow torch's single-tensor algorithms (what torch runs on CPU):
//
//   every algorithm:  g = maximize ? -grad : grad
//   SGD      g += wd * p;  momentum: buf = fresh ? g : buf * momentum + (1 - dampening) * g,
//                          g = nesterov ? g + momentum * buf : buf;  p += -lr * g
//   Adam     g += wd * p, then AdamW's moments and update without decoupled decay
//   AdamW    see adamw.h
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
#ifndef OPTSTATE_OPTIMIZER_STEP_H_
#define OPTSTATE_OPTIMIZER_STEP_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/adamw.h"

namespace optstate {

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

#endif  // OPTSTATE_OPTIMIZER_STEP_H_
