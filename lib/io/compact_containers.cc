// Arena chunks: small ones from the heap, large ones mapped on their own.
//
// A large chunk is mapped 2 MiB-aligned and advised MADV_HUGEPAGE. Where
// transparent huge pages are "madvise" (Debian's default), each 2 MiB of nodes
// then costs one page fault instead of 512; where they are "never" the advice is
// ignored and the chunk behaves as any anonymous mapping. Pages are still
// touched only as slots are used.
#include "optstate/chunked_arena.h"
#include "optstate/compact_containers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <new>

namespace optstate {
namespace {

constexpr size_t kHugePage = kMappedChunkBytes;  // mapped chunks are aligned to and rounded up to it

size_t RoundUp(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

// The texts CompactText::Common keeps once: class names the torch layer sets
// on containers it refines, one per dict of a large checkpoint.
constexpr std::string_view kCommonTexts[] = {"collections.OrderedDict", "collections.defaultdict",
                                             "collections.Counter", "torch.Size", "builtins.bytearray"};
constexpr size_t kCommonCount = sizeof kCommonTexts / sizeof kCommonTexts[0];

// Laid out as a heap block (length, bytes, NUL); 8-aligned so the low bits
// are free for the form tag.
struct alignas(8) StaticBlock {
  uint32_t size = 0;
  char bytes[28] = {};
};

const StaticBlock* CommonBlocks() {
  static const auto* blocks = [] {
    auto* b = new StaticBlock[kCommonCount];  // lives as long as the process, as texts may
    for (size_t i = 0; i < kCommonCount; ++i) {
      b[i].size = static_cast<uint32_t>(kCommonTexts[i].size());
      std::memcpy(b[i].bytes, kCommonTexts[i].data(), kCommonTexts[i].size());
    }
    return b;
  }();
  return blocks;
}

}  // namespace

CompactText CompactText::Common(std::string_view s) {
  CompactText t;
  for (size_t i = 0; i < kCommonCount; ++i) {
    if (s == kCommonTexts[i]) {
      static_assert(sizeof(StaticBlock::bytes) > 23, "the longest common text and its NUL");
      t.block_ = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(&CommonBlocks()[i]) | 2);
      return t;
    }
  }
  t.Assign(s);
  return t;
}

void* AllocateArenaChunk(size_t bytes, size_t alignment) {
  if (!MappedOnItsOwn(bytes)) return ::operator new(bytes, std::align_val_t{alignment});
  const size_t size = RoundUp(bytes);
  // Map one huge page more than needed and trim, so the chunk starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const size_t tail = (start + size + kHugePage) - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* chunk = reinterpret_cast<void*>(aligned);
  madvise(chunk, size, MADV_HUGEPAGE);  // advice only: no huge pages is not an error
  return chunk;
}

void DiscardArenaTail(void* chunk, size_t bytes, size_t /*alignment*/, void* from) {
  if (!MappedOnItsOwn(bytes)) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = (reinterpret_cast<uintptr_t>(from) + page - 1) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(chunk) + RoundUp(bytes);
  if (start < end) madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);  // advice; no error
}

void FreeArenaChunk(void* chunk, size_t bytes, size_t alignment) {
  if (!MappedOnItsOwn(bytes)) {
    ::operator delete(chunk, std::align_val_t{alignment});
    return;
  }
  munmap(chunk, RoundUp(bytes));
}

}  // namespace optstate
