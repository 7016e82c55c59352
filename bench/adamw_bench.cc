// Fused AdamW step throughput next to the memory bandwidth the step needs.
//
// Usage: adamw_bench [MILLION_PARAMS=100] [STEPS=10]
// Prints, for 1 and 2 threads: a STREAM-like kernel with AdamW's access pattern
// (read 4 float arrays, write 3 back: 28 bytes per element), the fused AdamW
// step for each instruction set this CPU has, and the scalar reference (1
// thread). Parameters are 100 tensors of equal size, so threads work both
// across and within tensors. Times are the best of STEPS runs.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <string>
#include <vector>

#include "optstate/optimizer.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTensors = 100;

// 64-byte aligned, as PyTorch's CPU allocator aligns tensors (and as torch.save
// aligns records): with malloc's 16-byte alignment every other 32-byte load
// would straddle two cache lines. Filled with distinct values: memory holding
// one repeated value can be merged behind our back (same-page merging) and
// then reads faster than DRAM allows.
struct Buffer {
  // `skew` elements of padding in front: see Arrays.
  Buffer(int64_t n, float scale, int64_t skew) {
    size_t bytes = (static_cast<size_t>(n + skew) * sizeof(float) + 63) / 64 * 64;
    base = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (base == nullptr) std::abort();
    data = base + skew;
    uint32_t x = 0x9E3779B9u ^ std::bit_cast<uint32_t>(scale);
    for (int64_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      data[i] = scale * (0.5f + static_cast<float>(x >> 8) * (1.0f / 16777216.0f));
    }
  }
  ~Buffer() { std::free(base); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float& operator[](int64_t i) { return data[i]; }
  float* base;
  float* data;
};

struct Arrays {
  // Four large allocations land at the same offset within a page; streaming
  // them together then suffers 4K aliasing (a load looks as if it depended on
  // a store to another array), which torch's separately allocated tensors
  // mostly avoid. Skewing the arrays by different multiples of 64 bytes keeps
  // the comparison about the kernels.
  explicit Arrays(int64_t n) : p(n, 0.5f, 0), g(n, 0.01f, 272), m(n, 0.001f, 544), v(n, 1e-4f, 816) {}
  Buffer p, g, m, v;
  float step[kTensors] = {};
};

// The same traffic as an AdamW step (4 reads, 3 writes per element), with the
// least arithmetic that keeps the compiler from skipping any of it.
__attribute__((noinline)) void StreamLike(float* __restrict p, const float* __restrict g, float* __restrict m,
                                          float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    m[i] = m[i] * 0.9f + gi;
    v[i] = v[i] * 0.99f + gi;
    p[i] = p[i] - 1e-3f * gi;
  }
}

double Best(int steps, const auto& fn) {
  double best = 1e30;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

double StreamSeconds(Arrays& a, int64_t n, int threads, int steps) {
  return Best(steps, [&] {
    std::vector<std::thread> pool;
    int64_t per = (n + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
      int64_t b = std::min(n, t * per), e = std::min(n, b + per);
      pool.emplace_back([&, b, e] { StreamLike(&a.p[b], &a.g[b], &a.m[b], &a.v[b], e - b); });
    }
    for (auto& th : pool) th.join();
  });
}

std::vector<optstate::AdamWTensor> Tensors(Arrays& a, int64_t n) {
  std::vector<optstate::AdamWTensor> out;
  int64_t per = n / kTensors;
  for (int i = 0; i < kTensors; ++i) {
    optstate::AdamWTensor t;
    int64_t at = i * per;
    t.param = &a.p[at];
    t.grad = &a.g[at];
    t.exp_avg = &a.m[at];
    t.exp_avg_sq = &a.v[at];
    t.step = &a.step[i];
    t.numel = i == kTensors - 1 ? n - at : per;
    out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double millions = argc > 1 ? std::atof(argv[1]) : 100;
  int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  auto n = static_cast<int64_t>(millions * 1e6);
  Arrays a(n);
  std::vector<optstate::AdamWTensor> tensors = Tensors(a, n);
  optstate::AdamWHyper hyper;
  const double bytes = 28.0 * static_cast<double>(n);
  std::printf("%lld float32 parameters in %d tensors, best of %d steps, 28 bytes moved per parameter\n\n",
              static_cast<long long>(n), kTensors, steps);
  std::printf("| what | threads | seconds | GB/s | of STREAM-like |\n|---|---|---|---|---|\n");
  for (int threads : {1, 2}) {
    double stream = StreamSeconds(a, n, threads, steps);
    std::printf("| STREAM-like (4 reads, 3 writes) | %d | %.4f | %.2f | 100%% |\n", threads, stream, bytes / stream / 1e9);
    for (optstate::Isa isa : {optstate::Isa::kGeneric, optstate::Isa::kAvx2, optstate::Isa::kAvx512}) {
      if (static_cast<int>(isa) > static_cast<int>(optstate::DetectIsa())) continue;
      optstate::AdamWOptions o;
      o.threads = threads;
      o.isa = isa;
      double t = Best(steps, [&] {
        if (!optstate::AdamWStep(tensors, hyper, o).ok()) std::abort();
      });
      std::printf("| optstate fused AdamW, %s | %d | %.4f | %.2f | %.0f%% |\n", std::string(optstate::IsaName(isa)).c_str(),
                  threads, t, bytes / t / 1e9, 100 * stream / t);
    }
    if (threads == 1) {
      double t = Best(std::min(steps, 3), [&] {
        if (!optstate::AdamWStepReference(tensors, hyper).ok()) std::abort();
      });
      std::printf("| optstate scalar reference | 1 | %.4f | %.2f | %.0f%% |\n", t, bytes / t / 1e9, 100 * stream / t);
    }
  }
  return 0;
}
