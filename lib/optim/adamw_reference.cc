// AdamWStepReference: torch.optim.AdamW's (and Adam's) single-tensor algorithm written out
// one element at a time, the yardstick for the vectorised kernels (built with
// -fno-tree-vectorize -ffp-contract=off). Deliberately shares no code with
// adamw_kernel.h beyond the dtype conversions (half_float.h), which must round as c10 does.
#include <cmath>

#include "optstate/optimizer.h"
#include "torch/element_values.h"

namespace optstate {
Status AdamWStepReference(std::span<const AdamWTensor> tensors, const AdamWHyper& h) {
  for (const AdamWTensor& t : tensors) {
    if (t.step == nullptr || (t.numel > 0 && (t.param == nullptr || t.exp_avg == nullptr || t.exp_avg_sq == nullptr)) ||
        (h.amsgrad && t.numel > 0 && t.max_exp_avg_sq == nullptr)) {
      return InvalidArgumentError("AdamW reference: incomplete tensor");
    }
    if (t.dtype != DType::kFloat32 && t.dtype != DType::kBFloat16 && t.dtype != DType::kFloat16) {
      return InvalidArgumentError("AdamW reference: unsupported dtype");
    }
  }
  for (const AdamWTensor& t : tensors) {
    // step_t += 1; step = step_t.item()
    *t.step += 1;
    double step = *t.step;
    double bias_correction1 = 1 - std::pow(h.beta1, step);
    double bias_correction2 = 1 - std::pow(h.beta2, step);
    double step_size = h.lr / bias_correction1;
    double bias_correction2_sqrt = std::sqrt(bias_correction2);
    // Python scalars meet float32 tensors: each is rounded to float once.
    float decay = h.decoupled_weight_decay ? static_cast<float>(1 - h.lr * h.weight_decay) : 1.0f;
    float l2 = h.decoupled_weight_decay ? 0.0f : static_cast<float>(h.weight_decay);
    float lerp_weight = static_cast<float>(1 - h.beta1);
    float beta2 = static_cast<float>(h.beta2);
    float sq_weight = static_cast<float>(1 - h.beta2);
    float value = static_cast<float>(-step_size);
    // One departure from torch, shared with the fast kernel: multiply by the
    // reciprocal instead of dividing (at most an ulp apart).
    float inv_bc2_sqrt = static_cast<float>(1 / bias_correction2_sqrt);
    float eps = static_cast<float>(h.eps);
    for (int64_t i = 0; i < t.numel; ++i) {
      float grad = t.grad == nullptr ? 0.0f : LoadAsFloat(t.grad, t.dtype, static_cast<size_t>(i));
      if (h.maximize) grad = -grad;
      float param = LoadAsFloat(t.param, t.dtype, static_cast<size_t>(i));
      // Adam: grad = grad.add(param, alpha=weight_decay)
      if (l2 != 0.0f) grad = grad + l2 * param;
      // AdamW: param.mul_(1 - lr * weight_decay)
      param = param * decay;
      // exp_avg.lerp_(grad, 1 - beta1)
      float exp_avg = t.exp_avg[i];
      if (lerp_weight < 0.5f) {
        exp_avg = exp_avg + lerp_weight * (grad - exp_avg);
      } else {
        exp_avg = grad - (grad - exp_avg) * (1.0f - lerp_weight);
      }
      t.exp_avg[i] = exp_avg;
      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
      float exp_avg_sq = t.exp_avg_sq[i] * beta2;
      exp_avg_sq = exp_avg_sq + (sq_weight * grad) * grad;
      t.exp_avg_sq[i] = exp_avg_sq;
      float second = exp_avg_sq;
      if (h.amsgrad) {
        // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        float old = t.max_exp_avg_sq[i];
        if (std::isnan(old) || std::isnan(second)) {
          second = std::isnan(old) ? old : second;
        } else if (old > second) {
          second = old;
        }
        t.max_exp_avg_sq[i] = second;
      }
      // denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
      float denom = std::sqrt(second) * inv_bc2_sqrt + eps;
      // param.addcdiv_(exp_avg, denom, value=-step_size)
      param = param + (value * exp_avg) / denom;
      StoreFromFloat(t.param, t.dtype, static_cast<size_t>(i), param);
    }
  }
  return Status();
}

}  // namespace optstate
