#include "state/group_order.h"

#include <string_view>
#include <unordered_map>

namespace optstate {
namespace {

// How far each group's list has been filled: the DP's state.
using Filled = std::vector<uint32_t>;

struct FilledHash {
  size_t operator()(const Filled& f) const {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(uint32_t)));
  }
};

// The states reachable once candidates [0, c) are decided, with how many ways
// lead to each (capped at 2: only "none", "one" and "several" matter).
struct Layer {
  std::vector<Filled> states;
  std::vector<uint8_t> ways;
  std::unordered_map<Filled, size_t, FilledHash> where;

  void Add(Filled f, uint8_t w) {
    auto [it, fresh] = where.emplace(f, states.size());
    if (fresh) {
      states.push_back(std::move(f));
      ways.push_back(0);
    }
    uint8_t& have = ways[it->second];
    have = static_cast<uint8_t>(have + w > 2 ? 2 : have + w);
  }
  std::optional<size_t> Find(const Filled& f) const {
    auto it = where.find(f);
    if (it == where.end()) return std::nullopt;
    return it->second;
  }
};

// A candidate's role in one fitting assignment: frozen, or the index it is.
constexpr size_t kFrozen = static_cast<size_t>(-1);

class GroupOrderSearch {
 public:
  explicit GroupOrderSearch(const GroupOrderInput& in) : in_(in) {
    size_t next = 0;
    for (size_t size : in_.group_sizes) {
      start_.push_back(next);
      next += size;
    }
    params_ = next;
  }

  GroupOrder Run(size_t max_states) {
    GroupOrder out;
    const size_t m = in_.candidate_shapes.size();
    if (in_.index_shapes.size() != params_ || m < params_) return out;
    frozen_budget_ = m - params_;
    std::vector<Layer> layers(m + 1);
    layers[0].Add(Filled(in_.group_sizes.size(), 0), 1);
    size_t held = 1;
    for (size_t c = 0; c < m; ++c) {
      const Layer& from = layers[c];
      Layer& to = layers[c + 1];
      for (size_t s = 0; s < from.states.size(); ++s) {
        ForEachMove(c, from.states[s], [&](const Filled& next, size_t) { to.Add(next, from.ways[s]); });
      }
      held += to.states.size();
      if (held > max_states) {
        out.gave_up = true;
        return out;
      }
    }
    std::optional<size_t> last = layers[m].Find(Filled(in_.group_sizes.begin(), in_.group_sizes.end()));
    if (!last) return out;
    out.fits = layers[m].ways[*last];
    Roles(layers, *last, out);
    return out;
  }

 private:
  // Calls `move(next, role)` for each way candidate `c` can be decided from
  // `filled`: frozen (while the budget lasts), or the next index of a group
  // whose state shape it has.
  template <typename Move>
  void ForEachMove(size_t c, const Filled& filled, Move&& move) const {
    size_t placed = 0;
    for (uint32_t f : filled) placed += f;
    if (c - placed < frozen_budget_) move(filled, kFrozen);
    for (size_t g = 0; g < filled.size(); ++g) {
      if (filled[g] == in_.group_sizes[g]) continue;
      const size_t index = start_[g] + filled[g];
      const std::optional<std::vector<int64_t>>& want = in_.index_shapes[index];
      if (want && *want != in_.candidate_shapes[c]) continue;
      Filled next = filled;
      ++next[g];
      move(next, index);
    }
  }

  // Backward from the final state: the states some fitting assignment passes
  // through, and every role each candidate takes in one.
  void Roles(const std::vector<Layer>& layers, size_t last, GroupOrder& out) const {
    const size_t m = in_.candidate_shapes.size();
    std::vector<std::vector<size_t>> roles(m);
    std::vector<bool> useful_next(layers[m].states.size(), false);
    useful_next[last] = true;
    for (size_t c = m; c-- > 0;) {
      const Layer& here = layers[c];
      const Layer& next_layer = layers[c + 1];
      std::vector<bool> useful(here.states.size(), false);
      for (size_t s = 0; s < here.states.size(); ++s) {
        ForEachMove(c, here.states[s], [&](const Filled& next, size_t role) {
          std::optional<size_t> n = next_layer.Find(next);
          if (!n || !useful_next[*n]) return;
          useful[s] = true;
          bool seen = false;
          for (size_t r : roles[c]) seen |= r == role;
          if (!seen) roles[c].push_back(role);
        });
      }
      useful_next = std::move(useful);
    }
    if (out.fits == 1) {
      out.candidate_of.assign(params_, 0);
      for (size_t c = 0; c < m; ++c) {
        if (roles[c].size() == 1 && roles[c][0] != kFrozen) out.candidate_of[roles[c][0]] = c;
      }
      return;
    }
    for (size_t c = 0; c < m; ++c) {
      if (roles[c].size() > 1) out.ambiguous.push_back(c);
    }
  }

  const GroupOrderInput& in_;
  std::vector<size_t> start_;
  size_t params_ = 0;
  size_t frozen_budget_ = 0;
};

}  // namespace

GroupOrder AssignInGroupOrder(const GroupOrderInput& input, size_t max_states) {
  return GroupOrderSearch(input).Run(max_states);
}

}  // namespace optstate
