// The pickle machine's memo. Internal to lib/pickle.
#ifndef OPTSTATE_LIB_PICKLE_MEMO_H_
#define OPTSTATE_LIB_PICKLE_MEMO_H_

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "optstate/chunked_arena.h"
#include "optstate/compact_containers.h"
#include "optstate/pickle_graph.h"

namespace optstate::pickle_internal {

// The memo: CPython's pickler numbers its entries 0, 1, 2, ... (torch's DCP
// .metadata memoizes nearly every object, 10^7 of them at 320 k chunks), so
// those are kept in growing chunks, 4 bytes each and never copied as they
// grow (a vector's doubling held 1.5 times the memo at 4 * 10^7 entries);
// indices out of that order (any pickle may use them) in a hash map. size()
// counts distinct indices, as len(memo) does for MEMOIZE.
class Memo {
 public:
  size_t size() const { return dense_.size() + sparse_.size(); }
  bool contains(uint64_t index) const { return index < dense_.size() || sparse_.contains(index); }
  void Set(uint64_t index, NodeId id) {
    if (index < dense_.size()) {
      dense_[index] = id;
    } else if (index == dense_.size()) {
      dense_.push_back(id);
      while (!sparse_.empty()) {  // entries set out of order that now continue the run
        auto next = sparse_.find(dense_.size());
        if (next == sparse_.end()) break;
        dense_.push_back(next->second);
        sparse_.erase(next);
      }
    } else {
      sparse_[index] = id;
    }
  }
  std::optional<NodeId> Get(uint64_t index) const {
    if (index < dense_.size()) return dense_[index];
    auto it = sparse_.find(index);
    if (it == sparse_.end()) return std::nullopt;
    return it->second;
  }

 private:
  ChunkedArena<NodeId> dense_;
  std::unordered_map<uint64_t, NodeId> sparse_;
};

}  // namespace optstate::pickle_internal

#endif  // OPTSTATE_LIB_PICKLE_MEMO_H_
