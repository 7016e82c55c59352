// Optimizer state tensors that share bytes. torch.load keeps storage sharing,
// so two moments saved as views of one storage come back as one tensor that
// every step writes twice: the file already holds one set of values where the
// optimizer had two. torch 2.6 writes exactly that for FSDP1's FULL_STATE_DICT
// of use_orig_params=True parameters gathered on CPU (exp_avg is exp_avg_sq).
// A step tensor shared by several entries is what FSDP.optim_state_dict gives
// a flat parameter's pieces: FSDP's own loader separates it, a plain
// load_state_dict counts each step once per entry.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "check/validate_checkpoint.h"
#include "optstate/params.h"
#include "pickle/graph_walk.h"

namespace optstate {
namespace {

struct Extent {
  int64_t storage;
  uint64_t begin;  // bytes into the storage
  uint64_t end;
  uint32_t key;    // index in OptimizerState::keys
  NodeId field;    // the field's name node
  bool step;
  NodeId view;     // the view's key in a per-view nested entry, or kNoNode
};

// Bytes a strided view reaches: [offset, offset + (1 + sum (size-1)*stride)) elements.
bool ByteRange(const TensorRef& t, uint64_t& begin, uint64_t& end) {
  if (t.storage < 0 || t.is_dtensor || t.numel() == 0) return false;
  uint64_t last = 0;
  for (size_t d = 0; d < t.sizes.size() && d < t.strides.size(); ++d) {
    if (t.strides[d] < 0) return false;
    last += static_cast<uint64_t>(t.sizes[d] - 1) * static_cast<uint64_t>(t.strides[d]);
  }
  const uint64_t item = GetDTypeInfo(t.dtype).element_size;
  begin = t.storage_offset * item;
  end = (t.storage_offset + last + 1) * item;
  return true;
}

}  // namespace

void CheckStateAliasing(const Checkpoint& cp, const OptimizerState& s, const std::string& at, FindingSink& sink) {
  const ObjectGraph& g = cp.graph;
  // Entries no param group lists are never used (state-without-param says
  // so): sharing bytes with one of them harms nothing.
  std::set<int64_t> listed_index;
  std::set<std::string> listed_fqn;
  for (const std::vector<NodeId>& group : s.group_params) {
    for (NodeId p : group) {
      if (g.at(p).kind == NodeKind::kInt) listed_index.insert(g.at(p).int_value);
      if (g.at(p).kind == NodeKind::kStr) listed_fqn.insert(g.at(p).text.str());
    }
  }
  const bool any_listed = !listed_index.empty() || !listed_fqn.empty();
  auto for_each_tensor = [&](auto&& fn) {
    for (uint32_t ki = 0; ki < s.keys.size(); ++ki) {
      const StateKey& k = s.keys[ki];
      if (k.kind != KeyKind::kIndex && k.kind != KeyKind::kFqn) continue;
      if (any_listed && !(k.kind == KeyKind::kIndex ? listed_index.count(k.index) : listed_fqn.count(k.fqn))) continue;
      if (g.at(k.value).kind != NodeKind::kDict) continue;
      for (auto [name, v] : g.at(k.value).entries) {
        if (g.at(v).kind == NodeKind::kTensor) fn(ki, name, v, kNoNode);
        if (g.at(v).kind != NodeKind::kDict) continue;  // per-view nesting (HeavyBall 2.x/3.x)
        for (auto [inner, iv] : g.at(v).entries) {
          if (g.at(iv).kind == NodeKind::kTensor) fn(ki, inner, iv, name);
        }
      }
    }
  };
  // Only storages that more than one state tensor uses can alias: count first,
  // so a file of 10^6 entries with a storage each collects nothing.
  std::vector<uint32_t> uses(cp.storages.size(), 0);
  auto storage_of = [&](NodeId v) -> const TensorRef* {
    const TensorRef& t = cp.tensors[g.at(v).tensor];
    return t.storage >= 0 && static_cast<size_t>(t.storage) < uses.size() ? &t : nullptr;
  };
  for_each_tensor([&](uint32_t, NodeId, NodeId v, NodeId) {
    if (const TensorRef* t = storage_of(v)) ++uses[t->storage];
  });
  std::vector<Extent> shared;
  for_each_tensor([&](uint32_t ki, NodeId name, NodeId v, NodeId view) {
    const TensorRef* t = storage_of(v);
    uint64_t begin = 0, end = 0;
    if (!t || uses[t->storage] < 2 || !ByteRange(*t, begin, end)) return;
    shared.push_back({t->storage, begin, end, ki, name, KeyText(g, name) == "step", view});
  });
  if (shared.empty()) return;
  std::sort(shared.begin(), shared.end(), [](const Extent& a, const Extent& b) {
    return a.storage != b.storage ? a.storage < b.storage : a.begin < b.begin;
  });
  auto where = [&](const Extent& e) {
    return "state[" + s.keys[e.key].text + "]." + (e.view == kNoNode ? "" : KeyText(g, e.view) + ".") +
           KeyText(g, e.field);
  };
  auto located = [&](const Extent& e) { return (at.empty() ? "" : at + ".") + where(e); };
  // One sweep per storage: each extent that starts before the furthest end so
  // far overlaps the extent that reached it (linear, however many overlap).
  size_t aliased = 0;
  std::map<size_t, std::vector<size_t>> shared_steps;  // first extent -> the others with its very bytes
  size_t reach = 0;
  for (size_t i = 1; i < shared.size(); ++i) {
    const Extent& a = shared[reach];
    const Extent& b = shared[i];
    if (b.storage != a.storage || b.begin >= a.end) {
      reach = i;
      continue;
    }
    if (a.step && b.step && a.begin == b.begin && a.end == b.end && a.key != b.key) {
      shared_steps[reach].push_back(i);
    } else if (++aliased <= 8) {
      sink.Add("state-tensors-alias", located(a),
               where(a) + " and " + where(b) + " are the same bytes (storage " + std::to_string(a.storage) +
                   ", bytes " + std::to_string(b.begin) + " to " + std::to_string(std::min(a.end, b.end)) +
                   "): torch.load keeps them one tensor, so each step writes both into it, and the file holds one "
                   "set of values where the optimizer kept two (torch 2.6 saves this for FSDP1 FULL_STATE_DICT of "
                   "use_orig_params=True parameters gathered on CPU). Save the state again from the run, or "
                   "rebuild it from a sharded save.");
    }
    if (b.end > a.end) reach = i;
  }
  if (aliased > 8) {
    sink.Add("state-tensors-alias", at.empty() ? "state" : at + ".state",
             std::to_string(aliased - 8) + " more state tensors share bytes with another (" +
                 std::to_string(aliased) + " in all).");
  }
  for (auto& [first, others] : shared_steps) {
    const size_t n = others.size() + 1;
    sink.Add("state-step-shared", located(shared[first]),
             "one step tensor serves " + std::to_string(n) + " entries (" + where(shared[first]) + ", " +
                 where(shared[others[0]]) + (n > 2 ? ", ..." : "") +
                 "), as FSDP.optim_state_dict saves a flat parameter's pieces: FSDP.optim_state_dict_to_load "
                 "gives each its own, but torch.optim's load_state_dict keeps them one tensor and counts each "
                 "step " + std::to_string(n) + " times. `optstate remap` writes a step per entry.");
  }
}

}  // namespace optstate
