#include "io/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace optstate {

void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& fn) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  size_t wanted = std::min(count, static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < wanted; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads than asked: the others share the work
    }
  }
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace optstate
