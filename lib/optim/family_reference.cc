// OptimizerStepReference: torch.optim's single-tensor SGD, Adagrad and RMSprop
// written out one element at a time, each line beside the torch call it
// stands for: the yardstick for family_kernel.h (built with
// -fno-tree-vectorize -ffp-contract=off). Adam and AdamW are
// AdamWStepReference's. Shares only the checks and dtype conversions.
#include <cmath>

#include "optim/optimizer_checks.h"
#include "optstate/optimizer.h"
#include "torch/element_values.h"

namespace optstate {
namespace {

float Load(const OptimizerTensor& t, int64_t i) {
  return LoadAsFloat(t.param, t.dtype, static_cast<size_t>(i));
}
float Grad(const OptimizerTensor& t, int64_t i, bool maximize) {
  float g = t.grad == nullptr ? 0.0f : LoadAsFloat(t.grad, t.dtype, static_cast<size_t>(i));
  return maximize ? -g : g;  // grad = -grad
}
void Store(const OptimizerTensor& t, int64_t i, float v) { StoreFromFloat(t.param, t.dtype, static_cast<size_t>(i), v); }

void SgdReference(const OptimizerTensor& t, const OptimizerHyper& h) {
  const float wd = static_cast<float>(h.weight_decay), momentum = static_cast<float>(h.momentum);
  const float keep = static_cast<float>(1 - h.dampening), neg_lr = static_cast<float>(-h.lr);
  for (int64_t i = 0; i < t.numel; ++i) {
    float p = Load(t, i);
    float d_p = Grad(t, i, h.maximize);
    if (h.weight_decay != 0) d_p = d_p + wd * p;  // d_p = d_p.add(param, alpha=weight_decay)
    if (h.momentum != 0) {
      float buf;
      if (t.fresh_momentum_buffer) {
        buf = d_p;  // buf = torch.clone(d_p)
      } else {
        buf = t.state[0][i] * momentum + keep * d_p;  // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      }
      t.state[0][i] = buf;
      d_p = h.nesterov ? d_p + momentum * buf : buf;  // d_p.add(buf, alpha=momentum)
    }
    Store(t, i, p + neg_lr * d_p);  // param.add_(d_p, alpha=-lr)
  }
}

void AdagradReference(const OptimizerTensor& t, const OptimizerHyper& h) {
  *t.step += 1;                      // step_t += 1
  const double step = *t.step;       // step = step_t.item()
  const double clr = h.lr / (1 + (step - 1) * h.lr_decay);
  const float wd = static_cast<float>(h.weight_decay), eps = static_cast<float>(h.eps);
  const float value = static_cast<float>(-clr);
  for (int64_t i = 0; i < t.numel; ++i) {
    float p = Load(t, i);
    float g = Grad(t, i, h.maximize);
    if (h.weight_decay != 0) g = g + wd * p;  // grad = grad.add(param, alpha=weight_decay)
    float sum = t.state[0][i] + (1.0f * g) * g;  // state_sum.addcmul_(grad, grad, value=1)
    t.state[0][i] = sum;
    float std_dev = std::sqrt(sum) + eps;         // std = state_sum.sqrt().add_(eps)
    Store(t, i, p + (value * g) / std_dev);       // param.addcdiv_(grad, std, value=-clr)
  }
}

void RmspropReference(const OptimizerTensor& t, const OptimizerHyper& h) {
  *t.step += 1;
  const float wd = static_cast<float>(h.weight_decay), eps = static_cast<float>(h.eps);
  const float alpha = static_cast<float>(h.alpha), weight = static_cast<float>(1 - h.alpha);
  const float momentum = static_cast<float>(h.momentum), neg_lr = static_cast<float>(-h.lr);
  for (int64_t i = 0; i < t.numel; ++i) {
    float p = Load(t, i);
    float g = Grad(t, i, h.maximize);
    if (h.weight_decay != 0) g = g + wd * p;
    // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    float sq = t.state[0][i] * alpha;
    sq = sq + (weight * g) * g;
    t.state[0][i] = sq;
    float avg;
    if (h.centered) {
      // grad_avg.lerp_(grad, 1 - alpha): ATen's two formulas, split at weight 0.5
      float ga = t.state[2][i];
      ga = weight < 0.5f ? ga + weight * (g - ga) : g - (g - ga) * (1.0f - weight);
      t.state[2][i] = ga;
      avg = std::sqrt(sq + (-1.0f * ga) * ga);  // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    } else {
      avg = std::sqrt(sq);
    }
    avg = avg + eps;  // avg.add_(eps)
    if (h.momentum > 0) {
      float buf = t.state[1][i] * momentum;  // buf.mul_(momentum).addcdiv_(grad, avg)
      buf = buf + (1.0f * g) / avg;
      t.state[1][i] = buf;
      Store(t, i, p + neg_lr * buf);  // param.add_(buf, alpha=-lr)
    } else {
      Store(t, i, p + (neg_lr * g) / avg);  // param.addcdiv_(grad, avg, value=-lr)
    }
  }
}

}  // namespace

Status OptimizerStepReference(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h) {
  if (a == Algorithm::kAdamW || a == Algorithm::kAdam) {
    return AdamWStepReference(AsAdamWTensors(tensors), AsAdamWHyper(a, h));
  }
  OPTSTATE_RETURN_IF_ERROR(CheckOptimizerTensors(a, tensors, h));
  for (const OptimizerTensor& t : tensors) {
    switch (a) {
      case Algorithm::kSgd: SgdReference(t, h); break;
      case Algorithm::kAdagrad: AdagradReference(t, h); break;
      case Algorithm::kRmsprop: RmspropReference(t, h); break;
      default: break;
    }
  }
  return Status();
}

}  // namespace optstate
