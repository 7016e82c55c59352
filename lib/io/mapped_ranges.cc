#include "io/mapped_ranges.h"

#include <atomic>
#include <cstring>

namespace optstate {
namespace {

// A fixed table of slots: no allocation and no lock, so a signal handler may
// read it at any moment. A slot is claimed by swapping its base from 0; size
// and path are written before base is published, and base is cleared first
// when the range goes away.
struct Slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<uint64_t> size{0};
  char path[512] = {};
};

Slot slots[kMaxMappedRanges];

}  // namespace

void RegisterMappedRange(const void* base, uint64_t size, const std::string& path) {
  if (base == nullptr || size == 0) return;
  for (Slot& s : slots) {
    uintptr_t expected = 0;
    // Claim with a sentinel (1: no real mapping starts there), fill, publish.
    if (!s.base.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    size_t n = std::min(path.size(), sizeof s.path - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    s.size.store(size, std::memory_order_relaxed);
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return;
  }
}

void UnregisterMappedRange(const void* base) {
  if (base == nullptr) return;
  for (Slot& s : slots) {
    uintptr_t expected = reinterpret_cast<uintptr_t>(base);
    if (s.base.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return;
  }
}

bool FindMappedRange(const void* address, const char** path, uint64_t* offset) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  for (Slot& s : slots) {
    uintptr_t base = s.base.load(std::memory_order_acquire);
    if (base <= 1 || a < base) continue;
    uint64_t size = s.size.load(std::memory_order_relaxed);
    if (a - base >= size) continue;
    *path = s.path;
    *offset = a - base;
    return true;
  }
  return false;
}

}  // namespace optstate
