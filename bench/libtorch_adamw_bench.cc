// LibTorch's own torch::optim::AdamW on the same problem as adamw_bench: 100
// float32 tensors, best of STEPS steps, 1 and 2 threads. Built only with
// -DOPTSTATE_BENCH_LIBTORCH=ON (it includes <torch/torch.h>).
// Usage: libtorch_adamw_bench [MILLION_PARAMS=100] [STEPS=10]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  double millions = argc > 1 ? std::atof(argv[1]) : 100;
  int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  auto n = static_cast<int64_t>(millions * 1e6);
  int64_t per = n / 100;
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 100; ++i) {
    // Distinct values (see adamw_bench.cc: repeated values can be page-merged).
    auto p = torch::rand({i < 99 ? per : n - 99 * per}).add_(0.25).requires_grad_(true);
    p.mutable_grad() = torch::rand_like(p).mul_(0.02);
    params.push_back(p);
  }
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(1e-2));
  opt.step();  // state created outside the timing
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    double best = 1e30;
    for (int s = 0; s < steps; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      opt.step();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("| LibTorch %s torch::optim::AdamW | %d | %.4f | %.2f | |\n", TORCH_VERSION, threads, best,
                28.0 * static_cast<double>(n) / best / 1e9);
  }
  return 0;
}
