// PagesAhead: a thread that faults in the pages of an arena's chunk ahead of
// the thread filling it (see chunked_arena.h).
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "optstate/chunked_arena.h"

namespace optstate {

namespace {
constexpr size_t kStepBytes = kMappedChunkBytes;  // one transparent huge page a call
}  // namespace

struct PagesAhead::State {
  std::mutex mu;
  std::condition_variable wake;
  // The latest request; a newer one replaces it (the filler has moved on).
  Range pending[2];
  int pending_count = 0;
  uint64_t generation = 0;  // bumped by every request, so a long fault-in notices a newer one
  std::atomic<bool> quit{false};  // set once, under mu, when the owner stops
  std::thread thread;

  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake.wait(lock, [this] { return quit.load(std::memory_order_relaxed) || pending_count > 0; });
      if (quit.load(std::memory_order_relaxed)) return;
      Range ranges[2] = {pending[0], pending[1]};
      const int count = pending_count;
      const uint64_t mine = generation;
      pending_count = 0;
      lock.unlock();
      bool supported = true;
      for (int r = 0; r < count && supported; ++r) supported = FaultIn(ranges[r], mine);
      lock.lock();
      if (!supported) return;  // a kernel before 5.14: nothing to do, ever
    }
  }

  // MADV_POPULATE_WRITE maps the pages writable without writing them, so it
  // races with nothing the filler does; a page the filler got to first is
  // skipped. Returns false when the kernel does not know the advice.
  bool FaultIn(Range range, uint64_t mine) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t at = reinterpret_cast<uintptr_t>(range.begin) & ~(page - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(range.begin) + range.bytes;
    while (at < end) {
      if (quit.load(std::memory_order_relaxed)) return true;
      {
        std::lock_guard<std::mutex> peek(mu);
        if (generation != mine) return true;  // superseded: the filler is further on
      }
      const uintptr_t step = std::min<uintptr_t>(kStepBytes - (at & (kStepBytes - 1)), end - at);
      const size_t length = static_cast<size_t>((step + page - 1) & ~(page - 1));
      if (madvise(reinterpret_cast<void*>(at), length, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) return false;
      at += step;
    }
    return true;
  }
};

PagesAhead::PagesAhead() : state_(new State) {
  try {
    state_->thread = std::thread([s = state_.get()] { s->Run(); });
  } catch (...) {
    state_.reset();  // no thread to be had: the filler faults its own pages, as without this
  }
}

PagesAhead::~PagesAhead() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->quit.store(true, std::memory_order_relaxed);
  }
  state_->wake.notify_one();
  state_->thread.join();
}

void PagesAhead::Request(Range first, Range second) {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->pending[0] = first;
    state_->pending[1] = second;
    state_->pending_count = second.bytes == 0 ? 1 : 2;
    ++state_->generation;
  }
  state_->wake.notify_one();
}

}  // namespace optstate
