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
// A chunk's memory. Chunks of 2 MiB and more are mapped on their own and, where
// the kernel offers transparent huge pages on request, backed by them: a graph of
// 10^7 nodes otherwise takes ~300 k page faults of 4 KiB, a fifth of its parse.
void* AllocateArenaChunk(size_t bytes, size_t alignment);
void FreeArenaChunk(void* chunk, size_t bytes, size_t alignment);
// Gives back the whole pages of [from, chunk + bytes) of a chunk mapped on its
// own (no-op for heap chunks): they read as zeros if touched again.
void DiscardArenaTail(void* chunk, size_t bytes, size_t alignment, void* from);

template <typename T>
class ChunkedArena {
  static constexpr unsigned kFirstBits = 6;  // the first chunk holds 2^6

 public:
  ChunkedArena() = default;
  ChunkedArena(const ChunkedArena& o) {
    for (const T& v : o) push_back(v);
  }
  ChunkedArena(ChunkedArena&& o) noexcept : chunks_(std::move(o.chunks_)), size_(std::exchange(o.size_, 0)) {}
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
    return *this;
  }
  ~ChunkedArena() {
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
  void* Slot() {
    size_t j = size_ + (size_t{1} << kFirstBits);
    unsigned c = static_cast<unsigned>(std::bit_width(j)) - kFirstBits - 1;
    if (c == chunks_.size()) {
      chunks_.push_back(static_cast<T*>(AllocateArenaChunk(sizeof(T) << (c + kFirstBits), alignof(T))));
    }
    return Locate(size_);
  }

  std::vector<T*> chunks_;
  size_t size_ = 0;
};

}  // namespace optstate

#endif  // OPTSTATE_CHUNKED_ARENA_H_
