// Two processes of one job played by two threads of a test, for the code that
// several processes run together (--distributed writes).
#ifndef OPTSTATE_TESTS_UNIT_THREAD_COORDINATOR_H_
#define OPTSTATE_TESTS_UNIT_THREAD_COORDINATOR_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "optstate/coordinator.h"

namespace optstate {

// At `deaf_at`, rank 1 contributes, waits for rank 0's word and then fails as
// if rank 0 had stopped answering, after calling `before_failing` (rank 0
// hears rank 1 and goes on). At `fails_at`, rank 1 says its part failed.
struct TwoThreadJob {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::optional<std::string>[2]> steps;
  std::string deaf_at;
  std::function<void()> before_failing;
  std::string fails_at;
};

class ThreadCoordinator : public Coordinator {
 public:
  ThreadCoordinator(TwoThreadJob& job, int rank) : job_(job), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  StatusOr<std::vector<std::string>> AllGather(const std::string& step, const std::string& mine) override {
    std::unique_lock<std::mutex> lock(job_.mu);
    auto& slots = job_.steps[step];
    slots[rank_] = rank_ == 1 && step == job_.fails_at ? "!I/O error: disk full" : mine;
    job_.cv.notify_all();
    if (rank_ == 1 && step == job_.deaf_at) {
      job_.cv.wait(lock, [&] { return slots[0].has_value(); });
      if (job_.before_failing) job_.before_failing();
      return IoError("no word from process 0 of 2");
    }
    job_.cv.wait(lock, [&] { return slots[0] && slots[1]; });
    return std::vector<std::string>{*slots[0], *slots[1]};
  }

 private:
  TwoThreadJob& job_;
  int rank_;
};

}  // namespace optstate

#endif  // OPTSTATE_TESTS_UNIT_THREAD_COORDINATOR_H_
