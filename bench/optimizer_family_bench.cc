// One step of every algorithm of the fused family (SGD, Adam, AdamW, Adagrad,
// RMSprop) on the same parameters: the fused kernel for each instruction set
// this CPU has at 1 and 2 threads, and the scalar reference at 1 thread.
//
// Usage: optimizer_family_bench [MILLION_PARAMS=20] [STEPS=5]
// Parameters are 100 float32 tensors of equal size; each algorithm runs with
// the options that touch the most state (SGD: momentum + nesterov; Adam(W):
// amsgrad off; RMSprop: centered + momentum). Times are the best of STEPS.
// Bytes moved per element: param and grad read, param written, plus each
// state tensor read and written; GB/s is that over the time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "optstate/optimizer.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTensors = 100;

struct Config {
  optstate::Algorithm algorithm;
  optstate::OptimizerHyper hyper;
  int state_tensors;
};

std::vector<Config> Configs() {
  using optstate::Algorithm;
  using optstate::OptimizerHyper;
  std::vector<Config> out;
  OptimizerHyper sgd = OptimizerHyper::Defaults(Algorithm::kSgd);
  sgd.momentum = 0.9;
  sgd.nesterov = true;
  sgd.weight_decay = 1e-4;
  out.push_back({Algorithm::kSgd, sgd, 1});
  out.push_back({Algorithm::kAdam, OptimizerHyper::Defaults(Algorithm::kAdam), 2});
  out.push_back({Algorithm::kAdamW, OptimizerHyper::Defaults(Algorithm::kAdamW), 2});
  out.push_back({Algorithm::kAdagrad, OptimizerHyper::Defaults(Algorithm::kAdagrad), 1});
  OptimizerHyper rms = OptimizerHyper::Defaults(Algorithm::kRmsprop);
  rms.centered = true;
  rms.momentum = 0.9;
  out.push_back({Algorithm::kRmsprop, rms, 3});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t total = static_cast<int64_t>((argc > 1 ? std::atof(argv[1]) : 20.0) * 1e6);
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int64_t per = total / kTensors;
  std::vector<float> param(static_cast<size_t>(per * kTensors), 0.5f), grad(param.size(), 0.01f);
  std::vector<float> state[3];
  for (auto& s : state) s.assign(param.size(), 1e-3f);
  std::vector<float> counters(kTensors, 0.0f);
  std::vector<optstate::Isa> isas = {optstate::Isa::kGeneric};
  if (optstate::DetectIsa() >= optstate::Isa::kAvx2) isas.push_back(optstate::Isa::kAvx2);
  if (optstate::DetectIsa() == optstate::Isa::kAvx512) isas.push_back(optstate::Isa::kAvx512);
  std::printf("%lld float32 parameters in %d tensors, best of %d steps\n", static_cast<long long>(per * kTensors),
              kTensors, steps);
  std::printf("%-8s %-10s %7s %10s %8s\n", "algo", "kernel", "threads", "ms/step", "GB/s");
  for (const Config& c : Configs()) {
    std::vector<optstate::OptimizerTensor> tensors(kTensors);
    const std::vector<optstate::StateSlot> slots = optstate::StateSlots(c.algorithm, c.hyper);
    for (int i = 0; i < kTensors; ++i) {
      optstate::OptimizerTensor& t = tensors[static_cast<size_t>(i)];
      t.param = param.data() + i * per;
      t.grad = grad.data() + i * per;
      t.numel = per;
      t.step = &counters[static_cast<size_t>(i)];
      for (size_t k = 0; k < slots.size(); ++k) {
        t.state[k] = slots[k].kept ? state[k].data() + i * per : nullptr;
      }
    }
    const double bytes = static_cast<double>(per * kTensors) * 4 * (3 + 2 * c.state_tensors);
    auto run = [&](const char* kernel, int threads, auto&& step) {
      double best = 1e30;
      for (int s = 0; s < steps; ++s) {
        auto start = Clock::now();
        if (!step().ok()) std::abort();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
      }
      std::printf("%-8s %-10s %7d %10.2f %8.1f\n", std::string(optstate::AlgorithmName(c.algorithm)).c_str(),
                  kernel, threads, best * 1e3, bytes / best / 1e9);
    };
    for (optstate::Isa isa : isas) {
      for (int threads : {1, 2}) {
        optstate::AdamWOptions o;
        o.isa = isa;
        o.threads = threads;
        run(std::string(optstate::IsaName(isa)).c_str(), threads,
            [&] { return optstate::OptimizerStep(c.algorithm, tensors, c.hyper, o); });
      }
    }
    run("reference", 1, [&] { return optstate::OptimizerStepReference(c.algorithm, tensors, c.hyper); });
  }
  return 0;
}
