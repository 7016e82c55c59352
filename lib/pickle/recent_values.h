// The ints and short strs the pickle machine made most recently, so that a
// value written again reuses its node. Internal to lib/pickle.
//
// Python's ints and strs are immutable: a pickle that writes 16 ten times
// unpickles to ten equal objects that nothing but id() can tell apart (CPython
// itself keeps one object for each of -5..256). A torch.save file writes about
// 22 small ints (numel, offset, sizes, strides, key shapes) and 11 short strs
// ('storage', 'cpu', 'exp_avg', ...) per parameter and memoizes none of them:
// half of its objects. One node for each recurring value halves the graph.
//
// Short tuples of such values, (16, 8) as a size and a key's shape, likewise.
//
// A direct-mapped cache of 1024 slots per kind: a value whose slot another
// value took since just gets a node of its own again. Nothing grows with the
// file, a lookup is one compare, and the slots are allocated on first use (a
// nested pickle of three objects costs nothing).
#ifndef OPTSTATE_LIB_PICKLE_RECENT_VALUES_H_
#define OPTSTATE_LIB_PICKLE_RECENT_VALUES_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "optstate/pickle_graph.h"

namespace optstate::pickle_internal {

class RecentValues {
 public:
  // Strs up to this many bytes are kept; longer ones are names and paths,
  // which rarely repeat unmemoized.
  static constexpr size_t kMaxStrBytes = 15;

  NodeId FindInt(int64_t v) const {
    if (!slots_) return kNoNode;
    const IntSlot& s = slots_->ints[IntSlotOf(v)];
    return s.id != kNoNode && s.value == v ? s.id : kNoNode;
  }
  void KeepInt(int64_t v, NodeId id) {
    IntSlot& s = Slots().ints[IntSlotOf(v)];
    s.value = v;
    s.id = id;
  }

  void ForgetInt(int64_t v) {
    if (slots_ && slots_->ints[IntSlotOf(v)].value == v) slots_->ints[IntSlotOf(v)].id = kNoNode;
  }

  NodeId FindStr(std::string_view text) const {
    if (!slots_ || text.size() > kMaxStrBytes) return kNoNode;
    const StrSlot& s = slots_->strs[StrSlotOf(text)];
    // Compared as views: an empty text's data() may be null, which memcmp must not get.
    return s.id != kNoNode && std::string_view(s.bytes, s.size) == text ? s.id : kNoNode;
  }
  void KeepStr(std::string_view text, NodeId id) {
    if (text.size() > kMaxStrBytes) return;
    StrSlot& s = Slots().strs[StrSlotOf(text)];
    s.size = static_cast<uint8_t>(text.size());
    if (!text.empty()) std::memcpy(s.bytes, text.data(), text.size());
    s.id = id;
  }
  // Tuples of up to three shared values, by their items' nodes.
  static constexpr size_t kMaxTupleItems = 3;
  NodeId FindTuple(const std::vector<NodeId>& items) const {
    if (!slots_ || items.empty() || items.size() > kMaxTupleItems) return kNoNode;
    const TupleSlot& s = slots_->tuples[TupleSlotOf(items)];
    if (s.id == kNoNode || s.size != items.size()) return kNoNode;
    for (size_t i = 0; i < items.size(); ++i) {
      if (s.items[i] != items[i]) return kNoNode;
    }
    return s.id;
  }
  void KeepTuple(const std::vector<NodeId>& items, NodeId id) {
    if (items.empty() || items.size() > kMaxTupleItems) return;
    TupleSlot& s = Slots().tuples[TupleSlotOf(items)];
    s.size = static_cast<uint8_t>(items.size());
    for (size_t i = 0; i < items.size(); ++i) s.items[i] = items[i];
    s.id = id;
  }
  void ForgetStr(std::string_view text) {
    if (FindStr(text) != kNoNode) slots_->strs[StrSlotOf(text)].id = kNoNode;
  }

 private:
  static constexpr size_t kSlots = 1024;
  struct IntSlot {
    int64_t value = 0;
    NodeId id = kNoNode;
  };
  struct StrSlot {
    uint8_t size = 0;
    char bytes[kMaxStrBytes] = {};
    NodeId id = kNoNode;
  };
  struct TupleSlot {
    uint8_t size = 0;
    NodeId items[kMaxTupleItems] = {};
    NodeId id = kNoNode;
  };
  struct Table {
    IntSlot ints[kSlots];
    StrSlot strs[kSlots];
    TupleSlot tuples[kSlots];
  };

  static size_t IntSlotOf(int64_t v) {
    return static_cast<size_t>((static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ull) >> 54);  // top 10 bits
  }
  static size_t StrSlotOf(std::string_view text) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over at most 15 bytes
    for (char c : text) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return static_cast<size_t>(h >> 54);
  }
  static size_t TupleSlotOf(const std::vector<NodeId>& items) {
    uint64_t h = items.size();
    for (NodeId i : items) h = (h ^ i) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 54);
  }
  Table& Slots() {
    if (!slots_) slots_ = std::make_unique<Table>();
    return *slots_;
  }

  std::unique_ptr<Table> slots_;
};

}  // namespace optstate::pickle_internal

#endif  // OPTSTATE_LIB_PICKLE_RECENT_VALUES_H_
