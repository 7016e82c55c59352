// The Adam / AdamW inner loop, written once as plain C++ and compiled three times
// (adamw_generic.cc, adamw_avx2.cc, adamw_avx512.cc) with different target
// flags, so GCC vectorises it for each instruction set; adamw.cc picks one at
// run time. Every file that includes this is built with -ffp-contract=off:
// no FMA contraction, so each variant rounds exactly as adamw_reference.cc.
// Internal to lib/.
#ifndef OPTSTATE_OPTIM_ADAMW_KERNEL_H_
#define OPTSTATE_OPTIM_ADAMW_KERNEL_H_

#include <cmath>
#include <cstdint>

#include "optim/kernel_dispatch.h"
#include "torch/half_float.h"

namespace optstate::optim {

// The per-tensor scalars of one step, in float as torch's kernels use them.
struct StepScalars {
  float decay;             // 1 - lr * weight_decay
  float one_minus_beta1;   // lerp weight
  float beta2;
  float one_minus_beta2;
  float neg_step_size;     // -lr / (1 - beta1^step)
  float inv_bias_correction2_sqrt;  // 1 / sqrt(1 - beta2^step), from double
  float eps;
  float l2;                // Adam's coupled weight decay (added to the gradient); 0 for AdamW
  bool amsgrad;
  bool maximize;
};

enum class ParamType { kFloat32, kBFloat16, kFloat16 };

// A contiguous piece of one tensor: [begin, end) of its elements.
struct Chunk {
  void* param;
  const void* grad;  // nullptr: a zero gradient
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq;
  ParamType type;
  int64_t begin, end;
  StepScalars s;
};

// Everything below is compiled once per instruction set, so it must not be
// shared between those files: as ordinary inline functions the linker kept one
// copy (the first file's, the x86-64 baseline) and every "variant" ran it. The
// anonymous namespace gives each file its own; tests/build/check_kernel_variants.sh
// checks that the objects export no shared (weak) symbols.
namespace {

// Calls body with a value of the type a parameter of `type` is stored as:
// float, the bits of a bfloat16 (uint16_t), or _Float16.
template <typename Body>
inline void DispatchParamType(ParamType type, Body&& body) {
  switch (type) {
    case ParamType::kFloat32: return body(float{});
    case ParamType::kBFloat16: return body(uint16_t{});
    case ParamType::kFloat16: return body(_Float16{});
  }
}

template <typename Storage>
struct Convert;
template <>
struct Convert<float> {
  static float Load(float x) { return x; }
  static float Store(float x) { return x; }
};
template <>
struct Convert<uint16_t> {  // bfloat16 bits
  static float Load(uint16_t x) { return Bf16ToFloat(x); }
  static uint16_t Store(float x) { return FloatToBf16(x); }
};
template <>
struct Convert<_Float16> {
  static float Load(_Float16 x) { return static_cast<float>(x); }
  static _Float16 Store(float x) { return static_cast<_Float16>(x); }  // IEEE round-to-nearest-even
};

// Which variant of the loop: each combination is compiled separately, so no
// loop branches per element.
enum LoopFlags : int { kAmsgrad = 1, kMaximize = 2, kHasGrad = 4, kLerpFromEnd = 8, kL2 = 16 };

// The order of operations follows torch's single-tensor AdamW and ATen's
// kernels: lerp as self + w * (end - self) for w < 0.5 and end - (end - self)
// * (1 - w) otherwise; addcmul as self + (value * a) * b; addcdiv as
// self + (value * a) / b. One departure: sqrt(v) is multiplied by the
// reciprocal of sqrt(1 - beta2^step) rather than divided by it, which saves a
// division per element (one thread is otherwise bound by the divider) and
// moves results by at most an ulp.
template <typename P, int kFlags>
inline void AdamWLoop(P* __restrict param, const P* __restrict grad, float* __restrict m, float* __restrict v,
                      float* __restrict vmax, int64_t n, const StepScalars& s) {
  const float decay = s.decay, w = s.one_minus_beta1, one_minus_w = 1.0f - w;
  const float beta2 = s.beta2, omb2 = s.one_minus_beta2;
  const float nss = s.neg_step_size, inv_bc2 = s.inv_bias_correction2_sqrt, eps = s.eps, l2 = s.l2;
  for (int64_t i = 0; i < n; ++i) {
    float g = (kFlags & kHasGrad) ? Convert<P>::Load(grad[i]) : 0.0f;
    if (kFlags & kMaximize) g = -g;
    float p = Convert<P>::Load(param[i]);
    if (kFlags & kL2) g = g + l2 * p;  // Adam: grad.add(param, alpha=weight_decay)
    p = p * decay;
    float mi = (kFlags & kLerpFromEnd) ? g - (g - m[i]) * one_minus_w : m[i] + w * (g - m[i]);
    float vi = v[i] * beta2 + (omb2 * g) * g;
    m[i] = mi;
    v[i] = vi;
    if (kFlags & kAmsgrad) {
      float a = vmax[i];
      vi = (a != a || a > vi) ? a : vi;  // torch.maximum: a NaN on either side wins
      vmax[i] = vi;
    }
    float denom = std::sqrt(vi) * inv_bc2 + eps;
    param[i] = Convert<P>::Store(p + (nss * mi) / denom);
  }
}

template <typename P>
inline void RunChunkAs(const Chunk& c) {
  auto* p = static_cast<P*>(c.param) + c.begin;
  const P* g = c.grad ? static_cast<const P*>(c.grad) + c.begin : nullptr;
  float* m = c.exp_avg + c.begin;
  float* v = c.exp_avg_sq + c.begin;
  float* vmax = c.max_exp_avg_sq ? c.max_exp_avg_sq + c.begin : nullptr;
  int64_t n = c.end - c.begin;
  const StepScalars& s = c.s;
  int flags = (s.amsgrad ? kAmsgrad : 0) | (s.maximize ? kMaximize : 0) | (g ? kHasGrad : 0) |
              (s.one_minus_beta1 < 0.5f ? 0 : kLerpFromEnd) | (s.l2 != 0.0f ? kL2 : 0);
  DispatchFlags<32>(flags, [&](auto f) { AdamWLoop<P, decltype(f)::value>(p, g, m, v, vmax, n, s); });
}

inline void RunChunkImpl(const Chunk& c) {
  DispatchParamType(c.type, [&](auto storage) { RunChunkAs<decltype(storage)>(c); });
}

}  // namespace
}  // namespace optstate::optim

#endif  // OPTSTATE_OPTIM_ADAMW_KERNEL_H_
