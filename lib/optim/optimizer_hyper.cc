// The family's vocabulary: algorithm names, torch's default hyperparameters,
// the state each algorithm keeps, and the checks every step makes first.
#include <algorithm>

#include "io/enum_names.h"
#include "optim/group_fields.h"
#include "optim/optimizer_checks.h"
#include "optstate/optimizer.h"

namespace optstate {

namespace {
constexpr EnumNames<Algorithm, 5> kAlgorithmNames({{
    {Algorithm::kAdamW, "adamw"}, {Algorithm::kAdam, "adam"}, {Algorithm::kSgd, "sgd"},
    {Algorithm::kAdagrad, "adagrad"}, {Algorithm::kRmsprop, "rmsprop"}}},
    "adamw");

using K = GroupFieldKind;
using H = OptimizerHyper;
constexpr GroupField kAdamFields[] = {
    {"betas", K::kBetas},      {"eps", K::kNumber, &H::eps},          {"weight_decay", K::kNumber, &H::weight_decay},
    {"amsgrad", K::kFlag, nullptr, &H::amsgrad},                      {"maximize", K::kFlag, nullptr, &H::maximize},
    {"foreach", K::kNone},     {"capturable", K::kFalse},             {"differentiable", K::kFalse},
    {"fused", K::kNone}};
constexpr GroupField kSgdFields[] = {
    {"momentum", K::kNumber, &H::momentum}, {"dampening", K::kNumber, &H::dampening},
    {"weight_decay", K::kNumber, &H::weight_decay}, {"nesterov", K::kFlag, nullptr, &H::nesterov},
    {"maximize", K::kFlag, nullptr, &H::maximize}, {"foreach", K::kNone}, {"differentiable", K::kFalse},
    {"fused", K::kNone}};
constexpr GroupField kAdagradFields[] = {
    {"lr_decay", K::kNumber, &H::lr_decay}, {"eps", K::kNumber, &H::eps},
    {"weight_decay", K::kNumber, &H::weight_decay},
    {"initial_accumulator_value", K::kNumber, &H::initial_accumulator_value}, {"foreach", K::kNone},
    {"maximize", K::kFlag, nullptr, &H::maximize}, {"differentiable", K::kFalse}, {"fused", K::kNone}};
constexpr GroupField kRmspropFields[] = {
    {"momentum", K::kNumber, &H::momentum}, {"alpha", K::kNumber, &H::alpha}, {"eps", K::kNumber, &H::eps},
    {"centered", K::kFlag, nullptr, &H::centered}, {"weight_decay", K::kNumber, &H::weight_decay},
    {"capturable", K::kFalse}, {"foreach", K::kNone}, {"maximize", K::kFlag, nullptr, &H::maximize},
    {"differentiable", K::kFalse}};
}  // namespace

std::span<const GroupField> GroupFields(Algorithm a) {
  switch (a) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam: return kAdamFields;
    case Algorithm::kSgd: return kSgdFields;
    case Algorithm::kAdagrad: return kAdagradFields;
    case Algorithm::kRmsprop: return kRmspropFields;
  }
  return {};
}

std::span<const std::span<const GroupField>> EveryGroupFieldTable() {
  static constexpr std::span<const GroupField> kTables[] = {kAdamFields, kSgdFields, kAdagradFields, kRmspropFields};
  return kTables;
}

std::string_view AlgorithmName(Algorithm a) { return kAlgorithmNames.Name(a); }

std::optional<Algorithm> AlgorithmFromName(std::string_view name) { return kAlgorithmNames.Find(name); }

OptimizerHyper OptimizerHyper::Defaults(Algorithm a) {
  OptimizerHyper h;  // Adam's defaults; torch's AdamW differs only in weight decay
  switch (a) {
    case Algorithm::kAdamW: h.weight_decay = 1e-2; break;
    case Algorithm::kAdam: break;
    case Algorithm::kSgd: break;  // torch requires lr; 1e-3 as the others
    case Algorithm::kAdagrad: h.lr = 1e-2; h.eps = 1e-10; break;
    case Algorithm::kRmsprop: h.lr = 1e-2; break;
  }
  return h;
}

AdamWHyper OptimizerHyper::ToAdamW() const {
  AdamWHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.eps = eps;
  h.weight_decay = weight_decay;
  h.amsgrad = amsgrad;
  h.maximize = maximize;
  return h;
}

std::vector<StateSlot> StateSlots(Algorithm a, const OptimizerHyper& h) {
  switch (a) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam: return {{"exp_avg", true}, {"exp_avg_sq", true}, {"max_exp_avg_sq", h.amsgrad}};
    case Algorithm::kSgd: return {{"momentum_buffer", h.momentum != 0}};
    case Algorithm::kAdagrad: return {{"sum", true}};
    case Algorithm::kRmsprop:
      return {{"square_avg", true}, {"momentum_buffer", h.momentum > 0}, {"grad_avg", h.centered}};
  }
  return {};
}

bool KeepsStep(Algorithm a) { return a != Algorithm::kSgd; }

void InitOptimizerState(Algorithm a, const OptimizerHyper& h, OptimizerTensor& t) {
  if (t.step != nullptr) *t.step = 0;
  const std::vector<StateSlot> slots = StateSlots(a, h);
  for (size_t k = 0; k < slots.size(); ++k) {
    if (t.state[k] == nullptr || t.numel <= 0) continue;
    float start = a == Algorithm::kAdagrad ? static_cast<float>(h.initial_accumulator_value) : 0.0f;
    std::fill_n(t.state[k], t.numel, start);
  }
  t.fresh_momentum_buffer = a == Algorithm::kSgd;
}

namespace {

std::string Num(double v) { return std::to_string(v); }

Status CheckHyper(Algorithm a, const OptimizerHyper& h) {
  if (!(h.lr >= 0)) return InvalidArgumentError("invalid learning rate: " + Num(h.lr));
  if (!(h.weight_decay >= 0)) return InvalidArgumentError("invalid weight_decay value: " + Num(h.weight_decay));
  switch (a) {
    case Algorithm::kAdamW:
    case Algorithm::kAdam: return Status();  // AdamWStep checks its own
    case Algorithm::kSgd:
      if (!(h.momentum >= 0)) return InvalidArgumentError("invalid momentum value: " + Num(h.momentum));
      if (h.nesterov && (h.momentum <= 0 || h.dampening != 0)) {
        return InvalidArgumentError("nesterov momentum requires a momentum and zero dampening");
      }
      return Status();
    case Algorithm::kAdagrad:
      if (!(h.lr_decay >= 0)) return InvalidArgumentError("invalid lr_decay value: " + Num(h.lr_decay));
      if (!(h.initial_accumulator_value >= 0)) {
        return InvalidArgumentError("invalid initial_accumulator_value value: " + Num(h.initial_accumulator_value));
      }
      if (!(h.eps >= 0)) return InvalidArgumentError("invalid epsilon value: " + Num(h.eps));
      return Status();
    case Algorithm::kRmsprop:
      if (!(h.eps >= 0)) return InvalidArgumentError("invalid epsilon value: " + Num(h.eps));
      if (!(h.momentum >= 0)) return InvalidArgumentError("invalid momentum value: " + Num(h.momentum));
      if (!(h.alpha >= 0)) return InvalidArgumentError("invalid alpha value: " + Num(h.alpha));
      return Status();
  }
  return Status();
}

}  // namespace

StatusOr<optim::ParamType> optim::ParamTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return optim::ParamType::kFloat32;
    case DType::kBFloat16: return optim::ParamType::kBFloat16;
    case DType::kFloat16: return optim::ParamType::kFloat16;
    default:
      return InvalidArgumentError("parameters must be float32, bfloat16 or float16, not " +
                                  std::string(GetDTypeInfo(dtype).name));
  }
}

Status CheckOptimizerTensors(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h) {
  OPTSTATE_RETURN_IF_ERROR(CheckHyper(a, h));
  const std::vector<StateSlot> slots = StateSlots(a, h);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OptimizerTensor& t = tensors[i];
    std::string where = "tensor " + std::to_string(i) + ": ";
    if (t.numel < 0) return InvalidArgumentError(where + "negative numel");
    if (KeepsStep(a) && t.step == nullptr) return InvalidArgumentError(where + "no step counter");
    if (t.numel > 0 && t.param == nullptr) return InvalidArgumentError(where + "no parameter");
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k].kept && t.numel > 0 && t.state[k] == nullptr) {
        return InvalidArgumentError(where + "no " + slots[k].name);
      }
    }
    OPTSTATE_RETURN_IF_ERROR(optim::ParamTypeOf(t.dtype).status());
  }
  return Status();
}


std::vector<AdamWTensor> AsAdamWTensors(std::span<const OptimizerTensor> tensors) {
  std::vector<AdamWTensor> out;
  out.reserve(tensors.size());
  for (const OptimizerTensor& t : tensors) {
    out.push_back({t.param, t.grad, t.dtype, t.state[0], t.state[1], t.state[2], t.step, t.numel});
  }
  return out;
}

AdamWHyper AsAdamWHyper(Algorithm a, const OptimizerHyper& h) {
  AdamWHyper out = h.ToAdamW();
  out.decoupled_weight_decay = a == Algorithm::kAdamW;
  return out;
}

}  // namespace optstate
