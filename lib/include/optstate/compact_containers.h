// Small owning containers for the fields of a pickle graph node.
//
// A checkpoint of 10^5 parameters unpickles into about 8 * 10^6 nodes, most of
// them ints, short strings and small tuples whose string and list fields stay
// empty. std::string (32 bytes) and std::vector (24 bytes) would spend most of
// each node on empty fields; these spend 8 and 16, allocate only when
// non-empty, and keep the interface the graph's users already write
// (`n.text == "state"`, `for (NodeId c : n.items)`, `n.entries.emplace_back`).
#ifndef OPTSTATE_COMPACT_CONTAINERS_H_
#define OPTSTATE_COMPACT_CONTAINERS_H_

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace optstate {

// An immutable-size string in 8 bytes. Up to 7 bytes live in those 8 bytes
// themselves (the first byte is 2 * length + 1, which no heap pointer's low
// byte is): torch.save writes "storage", "cpu", a storage key and a dict key
// for every tensor, 14 of 16 strings per parameter, and none of them then
// costs a malloc. Longer texts take one heap block (length, bytes, NUL).
// Empty is a null pointer. Reads as std::string_view; data() is not
// NUL-terminated for the inline form.
class CompactText {
  static_assert(std::endian::native == std::endian::little, "the inline tag is the pointer's low byte");
  static constexpr size_t kInline = 7;

 public:
  CompactText() = default;
  CompactText(std::string_view s) { Assign(s); }                     // NOLINT: implicit, like std::string
  CompactText(const std::string& s) { Assign(s); }                   // NOLINT
  CompactText(const char* s) { Assign(std::string_view(s)); }        // NOLINT
  CompactText(const CompactText& o) { Copy(o); }
  CompactText(CompactText&& o) noexcept : block_(std::exchange(o.block_, nullptr)) {}  // either form: 8 bytes
  CompactText& operator=(const CompactText& o) {
    if (this != &o) Copy(o);
    return *this;
  }
  CompactText& operator=(CompactText&& o) noexcept {
    std::swap(block_, o.block_);
    return *this;
  }
  CompactText& operator=(std::string_view s) { return Assign(s); }
  CompactText& operator=(const std::string& s) { return Assign(s); }
  CompactText& operator=(const char* s) { return Assign(std::string_view(s)); }
  ~CompactText() {
    if (OnHeap()) std::free(block_);
  }

  // One of a few fixed texts set on many nodes (a class name such as
  // "collections.OrderedDict", on 4 * 10^5 dicts of a large checkpoint):
  // refers to one static copy instead of a heap block each. Any other text
  // is held as usual.
  static CompactText Common(std::string_view s);

  std::string_view view() const {
    if (block_ == nullptr) return {};
    if (IsInline()) return {reinterpret_cast<const char*>(small_ + 1), static_cast<size_t>(small_[0] >> 1)};
    const char* block = Block();
    uint32_t n;
    std::memcpy(&n, block, sizeof n);
    return {block + sizeof n, n};
  }
  operator std::string_view() const { return view(); }  // NOLINT: reads as a string
  std::string str() const { return std::string(view()); }
  operator std::string() const { return str(); }  // NOLINT: where a std::string is wanted

  size_t size() const { return view().size(); }
  bool empty() const { return block_ == nullptr; }
  const char* data() const { return view().data() == nullptr ? "" : view().data(); }
  char operator[](size_t i) const { return view()[i]; }
  const char* begin() const { return data(); }
  const char* end() const { return data() + size(); }
  char back() const { return view().back(); }
  bool starts_with(std::string_view p) const { return view().starts_with(p); }
  bool ends_with(std::string_view p) const { return view().ends_with(p); }
  size_t find(std::string_view s, size_t pos = 0) const { return view().find(s, pos); }
  size_t find(char c, size_t pos = 0) const { return view().find(c, pos); }
  size_t rfind(std::string_view s, size_t pos = std::string_view::npos) const { return view().rfind(s, pos); }
  size_t rfind(char c, size_t pos = std::string_view::npos) const { return view().rfind(c, pos); }
  size_t find_first_of(std::string_view s, size_t pos = 0) const { return view().find_first_of(s, pos); }
  std::string substr(size_t pos, size_t n = std::string::npos) const { return std::string(view().substr(pos, n)); }
  int compare(std::string_view s) const { return view().compare(s); }

  friend bool operator==(const CompactText& a, const CompactText& b) { return a.view() == b.view(); }
  friend bool operator==(const CompactText& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const CompactText& a, const std::string& b) { return a.view() == std::string_view(b); }
  friend bool operator==(const CompactText& a, const char* b) { return a.view() == std::string_view(b); }
  friend auto operator<=>(const CompactText& a, const CompactText& b) { return a.view() <=> b.view(); }
  friend auto operator<=>(const CompactText& a, std::string_view b) { return a.view() <=> b; }
  friend std::string operator+(const CompactText& a, std::string_view b) {
    std::string s(a.view());
    s += b;
    return s;
  }
  friend std::string operator+(const CompactText& a, const std::string& b) { return a + std::string_view(b); }
  friend std::string operator+(const CompactText& a, const char* b) { return a + std::string_view(b); }
  friend std::string operator+(const CompactText& a, char b) { return a.str() + b; }
  friend std::string operator+(const std::string& a, const CompactText& b) {
    std::string s = a;
    s += b.view();
    return s;
  }
  friend std::string operator+(std::string&& a, const CompactText& b) {
    a += b.view();
    return std::move(a);
  }
  friend std::string operator+(const char* a, const CompactText& b) {
    std::string s = a;
    s += b.view();
    return s;
  }
  friend std::string operator+(char a, const CompactText& b) { return std::string(1, a) + b; }
  friend std::string& operator+=(std::string& a, const CompactText& b) { return a += b.view(); }
  friend std::ostream& operator<<(std::ostream& os, const CompactText& t) { return os << t.view(); }

 private:
  // The low two bits of the 8 bytes tell the forms apart: x1 inline, 10 a
  // static block (Common), 00 a heap block or empty (malloc aligns to 16).
  bool IsInline() const { return (small_[0] & 1) != 0; }
  bool IsStatic() const { return (small_[0] & 3) == 2; }
  bool OnHeap() const { return (small_[0] & 3) == 0; }
  const char* Block() const {
    return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(block_) & ~uintptr_t{3});
  }
  void Copy(const CompactText& o) {
    if (!o.IsStatic()) {
      Assign(o.view());
      return;
    }
    if (OnHeap()) std::free(block_);
    block_ = o.block_;
  }

  CompactText& Assign(std::string_view s) {
    if (!s.empty() && s.size() <= kInline) {
      unsigned char fresh[8] = {static_cast<unsigned char>(s.size() << 1 | 1)};
      std::memcpy(fresh + 1, s.data(), s.size());  // before the free: s may view this text
      if (OnHeap()) std::free(block_);
      std::memcpy(small_, fresh, sizeof fresh);
      return *this;
    }
    char* fresh = nullptr;
    if (!s.empty()) {
      fresh = static_cast<char*>(std::malloc(sizeof(uint32_t) + s.size() + 1));
      if (fresh == nullptr) throw std::bad_alloc();
      uint32_t n = static_cast<uint32_t>(s.size());
      std::memcpy(fresh, &n, sizeof n);
      std::memcpy(fresh + sizeof n, s.data(), s.size());
      fresh[sizeof n + s.size()] = '\0';
    }
    if (OnHeap()) std::free(block_);
    block_ = fresh;
    return *this;
  }

  union {
    char* block_ = nullptr;
    unsigned char small_[8];
  };
};

// A vector of trivially copyable values in 12 bytes (16 for elements aligned to 8): the children of one
// node. Up to 8 bytes of elements (two NodeIds, one Entry) live in the
// object itself, where the heap pointer would be: a torch.save file's shape,
// stride and key tuples are pairs, eleven per parameter, and none of them then
// costs a malloc. Beyond that it grows on the heap like std::vector. Pointers
// to the elements of an inline list move with the list (a heap list's do not).
// kInlineBytes (at least the 8 of the pointer) lets a list keep more inline:
// a tensor's sizes and strides hold two int64 each (TensorDims).
template <typename T, size_t kInlineBytes = 8>
class CompactList {
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(alignof(T) <= 8);
  static_assert(kInlineBytes >= 8 && kInlineBytes % 8 == 0);
  static constexpr uint32_t kInline = kInlineBytes / sizeof(T);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  CompactList() = default;
  CompactList(std::initializer_list<T> items) { Assign(items.begin(), items.size()); }
  CompactList(const std::vector<T>& items) { Assign(items.data(), items.size()); }  // NOLINT: as a vector
  template <typename U>
  CompactList(const std::vector<U>& items) {  // NOLINT: of what converts to T
    reserve(items.size());
    for (const U& u : items) push_back(T(u));
  }
  CompactList(const CompactList& o) { Assign(o.data(), o.size_); }
  CompactList(CompactList&& o) noexcept : size_(o.size_), heap_(o.heap_) {
    std::memcpy(raw_, o.raw_, sizeof raw_);  // the heap pointer, or the elements themselves
    o.size_ = 0;
    o.heap_ = false;
  }
  CompactList& operator=(const CompactList& o) {
    if (this != &o) Assign(o.data(), o.size_);
    return *this;
  }
  CompactList& operator=(CompactList&& o) noexcept {
    unsigned char raw[sizeof raw_];
    std::memcpy(raw, raw_, sizeof raw);
    std::memcpy(raw_, o.raw_, sizeof raw);
    std::memcpy(o.raw_, raw, sizeof raw);
    const uint32_t size = size_;
    const bool heap = heap_;
    size_ = o.size_;
    heap_ = o.heap_;
    o.size_ = size;
    o.heap_ = heap;
    return *this;
  }
  CompactList& operator=(std::initializer_list<T> items) {
    Assign(items.begin(), items.size());
    return *this;
  }
  CompactList& operator=(const std::vector<T>& items) {
    Assign(items.data(), items.size());
    return *this;
  }
  ~CompactList() {
    if (OnHeap()) FreeHeap(Heap());
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // On the heap, what malloc gave (it rounds a request up to its chunk).
  size_t capacity() const { return OnHeap() ? malloc_usable_size(Heap()) / sizeof(T) : kInline; }
  T* data() { return OnHeap() ? Heap() : reinterpret_cast<T*>(raw_); }
  const T* data() const { return OnHeap() ? Heap() : reinterpret_cast<const T*>(raw_); }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("CompactList::at");
    return data()[i];
  }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  std::vector<T> ToVector() const { return std::vector<T>(begin(), end()); }
  // Where a vector is wanted (of T, or of what T converts to).
  template <typename U>
  operator std::vector<U>() const {  // NOLINT
    return std::vector<U>(begin(), end());
  }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > capacity()) Grow(n);
  }
  void push_back(const T& v) {
    const T copy = v;  // v may live in this list, which may move
    if (size_ == capacity()) Grow(size_ + 1);
    data()[size_++] = copy;
  }
  template <typename... A>
  T& emplace_back(A&&... args) {
    T v(std::forward<A>(args)...);
    push_back(v);
    return back();
  }
  void resize(size_t n) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = T{};
    size_ = static_cast<uint32_t>(n);
  }
  // Inserts [first, last) before `at` (iterators of another container).
  template <typename It>
  void insert(T* at, It first, It last) {
    std::vector<T> tail(at, end());
    size_ = static_cast<uint32_t>(at - data());
    for (; first != last; ++first) push_back(T(*first));
    for (const T& v : tail) push_back(v);
  }
  void insert(T* at, const T& v) {
    const T copy = v;  // v may live in this list, which may move
    insert(at, &copy, &copy + 1);
  }
  T* erase(T* first, T* last) {
    T* e = std::copy(last, end(), first);
    size_ = static_cast<uint32_t>(e - data());
    return first;
  }
  T* erase(T* at) { return erase(at, at + 1); }

  friend bool operator==(const CompactList& a, const CompactList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const CompactList& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator<(const CompactList& a, const CompactList& b) {  // as std::vector orders
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool OnHeap() const { return heap_; }
  // Out of line: inlined, GCC 12 follows a list whose elements live inline
  // into this call and warns (-Wfree-nonheap-object) on a free that heap_
  // rules out.
  [[gnu::noinline]] static void FreeHeap(T* p) { std::free(p); }
  T* Heap() const {
    T* p;
    std::memcpy(&p, raw_, sizeof p);
    return p;
  }
  void Assign(const T* items, size_t n) {
    clear();
    reserve(n);
    if (n != 0) std::memmove(static_cast<void*>(data()), items, n * sizeof(T));
    size_ = static_cast<uint32_t>(n);
  }
  void Grow(size_t need) {
    // A node's children are bounded by the pickle limits long before 2^31.
    size_t cap = std::max<size_t>({need, OnHeap() ? capacity() * 2 : 0, 4});
    if (cap > kMaxSize) cap = kMaxSize;
    T* fresh;
    if (OnHeap()) {
      fresh = static_cast<T*>(std::realloc(static_cast<void*>(Heap()), cap * sizeof(T)));
    } else {
      fresh = static_cast<T*>(std::malloc(cap * sizeof(T)));
      if (fresh != nullptr && size_ != 0) std::memcpy(static_cast<void*>(fresh), raw_, size_ * sizeof(T));
    }
    if (fresh == nullptr) throw std::bad_alloc();
    std::memcpy(raw_, &fresh, sizeof fresh);
    heap_ = true;
  }

  static constexpr size_t kMaxSize = (size_t{1} << 31) - 1;
  // The heap pointer when heap_, else up to kInline elements. Aligned to 4
  // for elements of 4 bytes, so the list is 12 bytes: a node's items and
  // entries take 24 of its 56 (32 of 64 with a separate capacity, 480 MB at
  // the 3 * 10^7 nodes of 10^6 parameters). The heap block's capacity is
  // malloc's (capacity()).
  alignas(alignof(T) > 4 ? 8 : 4) unsigned char raw_[kInlineBytes] = {};
  uint32_t size_ : 31 = 0;
  uint32_t heap_ : 1 = 0;
};

// An owning pointer that copies what it points to: fields most values lack,
// kept out of line so the values that lack them do not pay for them.
template <typename T>
class OutOfLine {
 public:
  OutOfLine() = default;
  OutOfLine(const OutOfLine& o) : p_(o.p_ == nullptr ? nullptr : new T(*o.p_)) {}
  OutOfLine(OutOfLine&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  OutOfLine& operator=(const OutOfLine& o) {
    if (this != &o) {
      OutOfLine copy(o);
      std::swap(p_, copy.p_);
    }
    return *this;
  }
  OutOfLine& operator=(OutOfLine&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~OutOfLine() { delete p_; }

  explicit operator bool() const { return p_ != nullptr; }
  const T* operator->() const { return p_; }
  T& GetOrCreate() {
    if (p_ == nullptr) p_ = new T();
    return *p_;
  }

 private:
  T* p_ = nullptr;
};

}  // namespace optstate

#endif  // OPTSTATE_COMPACT_CONTAINERS_H_
