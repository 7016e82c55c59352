// ChunkedArena: the growing array a pickle graph keeps its nodes in (and the
// memo its dense indices), with chunks of 2 MiB and more mapped on their own.
#ifndef OPTSTATE_CHUNKED_ARENA_H_
#define OPTSTATE_CHUNKED_ARENA_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace optstate {

// Nodes in chunks of 64, 128, 256, ... elements: appending never moves a node
// (references stay valid), a graph of n nodes never holds 2n while it grows as
// a vector would, and a pickle of three objects costs one chunk of 64. Slots are
// constructed as they are used, so untouched pages of a chunk stay unbacked.
// A chunk's memory. Chunks of kMappedChunkBytes (2 MiB, one transparent huge
// page) and more are mapped on their own and, where the kernel offers
// transparent huge pages on request, backed by them: a graph of 10^7 nodes
// otherwise takes ~300 k page faults of 4 KiB, a fifth of its parse. Smaller
// chunks come from the heap.
inline constexpr size_t kMappedChunkBytes = size_t{2} << 20;
inline constexpr bool MappedOnItsOwn(size_t chunk_bytes) { return chunk_bytes >= kMappedChunkBytes; }
void* AllocateArenaChunk(size_t bytes, size_t alignment);
void FreeArenaChunk(void* chunk, size_t bytes, size_t alignment);
// Gives back the whole pages of [from, chunk + bytes) of a chunk mapped on its
// own (no-op for heap chunks): they read as zeros if touched again.
void DiscardArenaTail(void* chunk, size_t bytes, size_t alignment, void* from);

// Faults in pages on a thread of its own, ahead of the thread that fills them.
// The kernel zeroing fresh pages at their first touch (`perf`: clear_page_erms)
// was 41% of `inspect` on 10^6 parameters, 18% for the node arena alone, all on
// the parsing thread; here it happens on the other core while the parse goes on
// (inspect 21-23 s -> 18-20 s, 8 MiB more peak RSS). Requests are advice:
// nothing waits for them, and without a thread or MADV_POPULATE_WRITE (Linux
// 5.14) nothing happens.
class PagesAhead {
 public:
  struct Range {
    void* begin = nullptr;
    size_t bytes = 0;
  };
  PagesAhead();
  ~PagesAhead();  // stops the thread; no fault-in runs after it returns
  PagesAhead(const PagesAhead&) = delete;
  PagesAhead& operator=(const PagesAhead&) = delete;
  // Replaces whatever is still pending: the filler has moved on.
  void Request(Range first, Range second);  // second.bytes 0: none

 private:
  struct State;
  std::unique_ptr<State> state_;
};

template <typename T>
class ChunkedArena {
  static constexpr unsigned kFirstBits = 6;  // the first chunk holds 2^6

 public:
  ChunkedArena() = default;
  ChunkedArena(const ChunkedArena& o) {
    for (const T& v : o) push_back(v);
  }
  ChunkedArena(ChunkedArena&& o) noexcept
      : chunks_(std::move(o.chunks_)),
        size_(std::exchange(o.size_, 0)),
        ahead_(std::move(o.ahead_)),
        ahead_at_(std::exchange(o.ahead_at_, 0)) {}
  ChunkedArena& operator=(const ChunkedArena& o) {
    if (this != &o) {
      ChunkedArena copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  ChunkedArena& operator=(ChunkedArena&& o) noexcept {
    std::swap(chunks_, o.chunks_);
    std::swap(size_, o.size_);
    std::swap(ahead_, o.ahead_);
    std::swap(ahead_at_, o.ahead_at_);
    return *this;
  }
  ~ChunkedArena() {
    ahead_.reset();  // no fault-in of a chunk about to be unmapped
    for (size_t i = 0; i < size_; ++i) (*this)[i].~T();
    for (size_t c = 0; c < chunks_.size(); ++c) {
      FreeArenaChunk(chunks_[c], sizeof(T) << (c + kFirstBits), alignof(T));
    }
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Destroys the elements from n on and returns their memory: chunks wholly
  // past n are freed, and the pages past n in the last one given back.
  void Truncate(size_t n) {
    if (n >= size_) return;
    ahead_.reset();  // it would fault in what is given back below
    ahead_at_ = 0;
    for (size_t i = n; i < size_; ++i) (*this)[i].~T();
    size_ = n;
    while (!chunks_.empty() && FirstOf(chunks_.size() - 1) >= n) {
      const size_t c = chunks_.size() - 1;
      FreeArenaChunk(chunks_[c], sizeof(T) << (c + kFirstBits), alignof(T));
      chunks_.pop_back();
    }
    if (!chunks_.empty() && n > 0) {
      const size_t c = chunks_.size() - 1;
      DiscardArenaTail(chunks_[c], sizeof(T) << (c + kFirstBits), alignof(T), Locate(n - 1) + 1);
    }
  }
  T& operator[](size_t i) { return *Locate(i); }
  const T& operator[](size_t i) const { return *const_cast<ChunkedArena*>(this)->Locate(i); }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  void push_back(const T& v) { new (Slot()) T(v); ++size_; }
  void push_back(T&& v) { new (Slot()) T(std::move(v)); ++size_; }
  template <typename... A>
  T& emplace_back(A&&... args) {
    T* s = new (Slot()) T(std::forward<A>(args)...);
    ++size_;
    return *s;
  }
  template <typename Arena, typename V>
  class Iter {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = V&;
    using pointer = V*;
    using iterator_category = std::forward_iterator_tag;
    Iter() = default;
    Iter(Arena* a, size_t i) : a_(a), i_(i) {}
    V& operator*() const { return (*a_)[i_]; }
    V* operator->() const { return &(*a_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++i_;
      return t;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }

   private:
    Arena* a_ = nullptr;
    size_t i_ = 0;
  };
  using iterator = Iter<ChunkedArena, T>;
  using const_iterator = Iter<const ChunkedArena, const T>;
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  // Chunk c holds 2^(c + kFirstBits) elements and starts at element
  // 2^(c + kFirstBits) - 2^kFirstBits.
  static size_t FirstOf(size_t c) { return (size_t{1} << (c + kFirstBits)) - (size_t{1} << kFirstBits); }
  T* Locate(size_t i) {
    size_t j = i + (size_t{1} << kFirstBits);
    unsigned c = static_cast<unsigned>(std::bit_width(j)) - kFirstBits - 1;
    return chunks_[c] + (j - (size_t{1} << (c + kFirstBits)));
  }
  static size_t ChunkBytes(size_t c) { return sizeof(T) << (c + kFirstBits); }
  void* Slot() {
    size_t j = size_ + (size_t{1} << kFirstBits);
    unsigned c = static_cast<unsigned>(std::bit_width(j)) - kFirstBits - 1;
    if (c == chunks_.size()) chunks_.push_back(static_cast<T*>(AllocateArenaChunk(ChunkBytes(c), alignof(T))));
    if (size_ >= ahead_at_) [[unlikely]] AskForPagesAhead(c);
    return Locate(size_);
  }
  // Every 2 MiB of elements, asks for the next 8 MiB to be faulted in (past
  // the chunk's end, in the next chunk, mapped now for it). Heap chunks are
  // not worth a thread.
  static constexpr size_t kAheadBytes = size_t{8} << 20;
  static constexpr size_t kAskEveryBytes = kMappedChunkBytes;
  void AskForPagesAhead(unsigned c) {
    if (!MappedOnItsOwn(ChunkBytes(c))) {
      unsigned big = c;
      while (!MappedOnItsOwn(ChunkBytes(big))) ++big;
      ahead_at_ = FirstOf(big);
      return;
    }
    if (!ahead_) ahead_ = std::make_unique<PagesAhead>();
    char* here = reinterpret_cast<char*>(Locate(size_));
    const size_t left = static_cast<size_t>(reinterpret_cast<char*>(chunks_[c]) + ChunkBytes(c) - here);
    PagesAhead::Range next;
    if (left < kAheadBytes) {
      if (c + 1 == chunks_.size()) {
        chunks_.push_back(static_cast<T*>(AllocateArenaChunk(ChunkBytes(c + 1), alignof(T))));
      }
      next = {chunks_[c + 1], kAheadBytes - left};
    }
    ahead_->Request({here, std::min(left, kAheadBytes)}, next);
    ahead_at_ = size_ + kAskEveryBytes / sizeof(T);
  }

  std::vector<T*> chunks_;
  size_t size_ = 0;
  std::unique_ptr<PagesAhead> ahead_;  // made with the first chunk of 2 MiB
  size_t ahead_at_ = 0;                // the element whose slot asks again
};

}  // namespace optstate

#endif  // OPTSTATE_CHUNKED_ARENA_H_
