// The fused-kernel optimizer: torch.optim's SGD, Adam, AdamW, Adagrad and
// RMSprop steps on raw memory, each beside a scalar reference; and the two jobs
// it does on checkpoints, regenerate and verify (their contracts further down).
#ifndef OPTSTATE_OPTIMIZER_H_
#define OPTSTATE_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/checkpoint_writer.h"
#include "optstate/collisions.h"
#include "optstate/params.h"
#include "optstate/status.h"
#include "optstate/torch_objects.h"

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

// Realistic optimizer checkpoints without Python: K fused steps of torch.optim's
// AdamW (or Adam, SGD, Adagrad, RMSprop: optimizer.h) with
// seeded synthetic gradients on a list of parameters, written in the key
// scheme asked for, including the broken layouts optstate exists to repair.
//
// Values are a pure function of (seed, parameter index, step), so a checkpoint
// is reproducible, and tensors are computed one parameter (or one FSDP
// collision group) at a time while the file is written: memory stays bounded
// by the largest parameter, not the model.
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

// Does a checkpoint's optimizer state actually belong to, and act on, the
// model's parameters? Static checks on every entry, then a replay: one step of
// the algorithm that saved it (torch.optim's SGD, Adam, AdamW, Adagrad or
// RMSprop, recognised from the file or named by VerifyOptions::optimizer;
// optimizer.h) with a fixed probe gradient, once with the loaded state and once with fresh
// state. A parameter whose two updates come out identical is "cold": its state
// is missing, zero, or was never mapped to it (what HeavyBall's pointer keys
// did silently). HeavyBall 3.x's AdamW entries ({0: {update_by_adam_exp_avg_0,
// ..._sq_0}}, one counter per group in the first parameter's view) are replayed
// with HeavyBall's step, whose moments carry their bias correction; torch.optim
// entries with torch's.
struct VerifyFinding {
  std::string param;    // "" for findings about the whole state
  std::string check;    // stable id: "no-state", "non-canonical-keys", "shape", "dtype", "step-mismatch",
                        // "negative-exp-avg-sq", "negative-accumulator" (Adagrad's sum, RMSprop's
                        // square_avg), "non-finite", "cold", "non-finite-update", "unreplayable", "no-step"
  std::string message;
};

struct VerifyReport {
  size_t params = 0;
  size_t replayed = 0;              // parameters whose step was replayed
  std::vector<std::string> cold;    // parameter names
  std::vector<VerifyFinding> findings;
  bool values_from_model = false;   // every replay started from the model's values (else synthetic:
                                    // a manifest only, or DTensor shards of the model's tensors)
  std::vector<std::string> notes;   // how the replay differed from the saved hyperparameters
  // The algorithm the state was saved by (state/optimizer_family.h), or the
  // one --optimizer named; replayed unless it is "unknown".
  std::string algorithm;
  bool replay_applicable = true;
  // The step each replay ran: "SGD", "Adam", "AdamW" (also for adam-or-adamw),
  // "Adagrad", "RMSprop", "HeavyBall 3.x AdamW"; "" when not applicable.
  std::string replayed_with;
};

struct VerifyOptions {
  uint64_t probe_seed = 0;  // the probe gradient is a pure function of this and the parameter index
  std::string optimizer;    // "" = recognised from the file; adam, adamw, sgd, adagrad, rmsprop
};

// `m` comes from OpenAndMatch. Parameter values are read from the model
// state_dict the parameters came from (m.model()); with a manifest, they are
// synthetic (the replay compares updates, which weight decay alone does not
// make differ). Errors only for input that cannot be read.
StatusOr<VerifyReport> VerifyState(const MatchedState& m, const VerifyOptions& options = {});

}  // namespace optstate

#endif  // OPTSTATE_OPTIMIZER_H_
