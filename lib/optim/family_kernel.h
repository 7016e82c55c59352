// The SGD, Adagrad and RMSprop inner loops, compiled once per instruction set
// as the AdamW loop is (family_generic.cc, family_avx2.cc, family_avx512.cc,
// all with -ffp-contract=off) and picked at run time by optimizer_step.cc.
// The scalar yardstick is family_reference.cc, which shares nothing with this
// file but the dtype conversions. Internal to lib/.
#ifndef OPTSTATE_OPTIM_FAMILY_KERNEL_H_
#define OPTSTATE_OPTIM_FAMILY_KERNEL_H_

#include <cmath>
#include <cstdint>

#include "optim/adamw_kernel.h"
#include "optim/kernel_dispatch.h"

namespace optstate::optim {

enum class FamilyAlgorithm { kSgd, kAdagrad, kRmsprop };

// One step's scalars, each a Python float rounded to float32 once.
struct FamilyScalars {
  float grad_sign;      // -1 with maximize (an exact negation)
  float weight_decay;
  bool decay;           // weight_decay != 0 (torch skips the term otherwise)
  bool use_momentum;    // SGD: momentum != 0; RMSprop: momentum > 0
  float momentum;       // SGD, RMSprop
  float one_minus_dampening;  // SGD
  bool nesterov;        // SGD
  bool fresh_buffer;    // SGD: the buffer is created from this step's gradient
  float neg_lr;         // -lr; Adagrad: -lr / (1 + (step - 1) * lr_decay), from double
  float eps;            // Adagrad, RMSprop
  float alpha;          // RMSprop
  float one_minus_alpha;
  bool centered;        // RMSprop
};

struct FamilyChunk {
  FamilyAlgorithm algorithm;
  void* param;
  const void* grad;    // nullptr: a zero gradient
  float* state[3];     // StateSlots order (optimizer.h)
  ParamType type;
  int64_t begin, end;
  FamilyScalars s;
};

namespace {

enum FamilyFlags : int { kFHasGrad = 1, kFDecay = 2, kFMomentum = 4, kFOption = 8, kFOption2 = 16 };

// torch.optim.SGD. kFOption: nesterov; kFOption2: the buffer is fresh.
template <typename P, int kFlags>
inline void SgdLoop(P* __restrict param, const P* __restrict grad, float* __restrict buf, int64_t n,
                    const FamilyScalars& s) {
  const float sign = s.grad_sign, wd = s.weight_decay, mom = s.momentum, keep = s.one_minus_dampening;
  const float neg_lr = s.neg_lr;
  for (int64_t i = 0; i < n; ++i) {
    float g = (kFlags & kFHasGrad) ? Convert<P>::Load(grad[i]) * sign : 0.0f;
    float p = Convert<P>::Load(param[i]);
    if (kFlags & kFDecay) g = g + wd * p;
    if (kFlags & kFMomentum) {
      float b = (kFlags & kFOption2) ? g : buf[i] * mom + keep * g;
      buf[i] = b;
      g = (kFlags & kFOption) ? g + mom * b : b;
    }
    param[i] = Convert<P>::Store(p + neg_lr * g);
  }
}

// torch.optim.Adagrad (dense gradients).
template <typename P, int kFlags>
inline void AdagradLoop(P* __restrict param, const P* __restrict grad, float* __restrict sum, int64_t n,
                        const FamilyScalars& s) {
  const float sign = s.grad_sign, wd = s.weight_decay, neg_clr = s.neg_lr, eps = s.eps;
  for (int64_t i = 0; i < n; ++i) {
    float g = (kFlags & kFHasGrad) ? Convert<P>::Load(grad[i]) * sign : 0.0f;
    float p = Convert<P>::Load(param[i]);
    if (kFlags & kFDecay) g = g + wd * p;
    float acc = sum[i] + g * g;  // addcmul_(grad, grad, value=1)
    sum[i] = acc;
    float std_dev = std::sqrt(acc) + eps;
    param[i] = Convert<P>::Store(p + (neg_clr * g) / std_dev);
  }
}

// torch.optim.RMSprop. kFOption: centered; kFOption2: lerp from the end
// (weight 1 - alpha >= 0.5, torch's other lerp formula).
template <typename P, int kFlags>
inline void RmspropLoop(P* __restrict param, const P* __restrict grad, float* __restrict square_avg,
                        float* __restrict buf, float* __restrict grad_avg, int64_t n, const FamilyScalars& s) {
  const float sign = s.grad_sign, wd = s.weight_decay, mom = s.momentum, neg_lr = s.neg_lr, eps = s.eps;
  const float alpha = s.alpha, w = s.one_minus_alpha, one_minus_w = 1.0f - w;
  for (int64_t i = 0; i < n; ++i) {
    float g = (kFlags & kFHasGrad) ? Convert<P>::Load(grad[i]) * sign : 0.0f;
    float p = Convert<P>::Load(param[i]);
    if (kFlags & kFDecay) g = g + wd * p;
    float sq = square_avg[i] * alpha + (w * g) * g;
    square_avg[i] = sq;
    float avg;
    if (kFlags & kFOption) {
      float ga = (kFlags & kFOption2) ? g - (g - grad_avg[i]) * one_minus_w : grad_avg[i] + w * (g - grad_avg[i]);
      grad_avg[i] = ga;
      avg = std::sqrt(sq + (-1.0f * ga) * ga);
    } else {
      avg = std::sqrt(sq);
    }
    avg = avg + eps;
    if (kFlags & kFMomentum) {
      float b = buf[i] * mom + (1.0f * g) / avg;
      buf[i] = b;
      param[i] = Convert<P>::Store(p + neg_lr * b);
    } else {
      param[i] = Convert<P>::Store(p + (neg_lr * g) / avg);
    }
  }
}

template <typename P>
inline void RunFamilyChunkAs(const FamilyChunk& c) {
  auto* p = static_cast<P*>(c.param) + c.begin;
  const P* g = c.grad ? static_cast<const P*>(c.grad) + c.begin : nullptr;
  const int64_t n = c.end - c.begin;
  const FamilyScalars& s = c.s;
  auto at = [&](int k) { return c.state[k] ? c.state[k] + c.begin : nullptr; };
  int flags = (g ? kFHasGrad : 0) | (s.decay ? kFDecay : 0) | (s.use_momentum ? kFMomentum : 0);
  switch (c.algorithm) {
    case FamilyAlgorithm::kSgd:
      flags |= (s.nesterov ? kFOption : 0) | (s.fresh_buffer ? kFOption2 : 0);
      return DispatchFlags<32>(flags, [&](auto f) { SgdLoop<P, decltype(f)::value>(p, g, at(0), n, s); });
    case FamilyAlgorithm::kAdagrad:
      return DispatchFlags<4>(flags & (kFHasGrad | kFDecay), [&](auto f) { AdagradLoop<P, decltype(f)::value>(p, g, at(0), n, s); });
    case FamilyAlgorithm::kRmsprop:
      flags |= (s.centered ? kFOption : 0) |
               (s.one_minus_alpha < 0.5f ? 0 : kFOption2);
      return DispatchFlags<32>(flags, [&](auto f) {
        // kFOption2 means nothing without centering: those eight are not built.
        constexpr int kF = decltype(f)::value;
        if constexpr ((kF & kFOption2) == 0 || (kF & kFOption) != 0) {
          RmspropLoop<P, kF>(p, g, at(0), at(1), at(2), n, s);
        }
      });
  }
}

inline void RunFamilyChunkImpl(const FamilyChunk& c) {
  DispatchParamType(c.type, [&](auto storage) { RunFamilyChunkAs<decltype(storage)>(c); });
}

}  // namespace
}  // namespace optstate::optim

#endif  // OPTSTATE_OPTIM_FAMILY_KERNEL_H_
