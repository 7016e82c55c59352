#include "optstate/collisions.h"

#include <algorithm>
#include <cmath>

namespace optstate {
namespace {

// torch.optim names the counter `step`; HeavyBall 0.x's groups count in `k`.
std::optional<double> GroupStep(const Checkpoint& cp, ByteSpan bytes, const OptimizerState& st) {
  const ObjectGraph& g = cp.graph;
  NodeId groups = DictLookup(g, st.node, "param_groups");
  if (groups == kNoNode || g.at(groups).items.size() != 1) return std::nullopt;
  NodeId group = g.at(groups).items[0];
  for (const char* name : {"step", "k"}) {
    NodeId v = DictLookup(g, group, name);
    if (v != kNoNode) {
      std::optional<double> s = NumberValue(cp, bytes, v);
      if (s && *s > 0) return s;
    }
  }
  return std::nullopt;
}

std::string Count(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

CollisionEvidence FindCollisionEvidence(const Checkpoint& cp, ByteSpan bytes, const OptimizerState& st) {
  const ObjectGraph& g = cp.graph;
  CollisionEvidence e;
  e.entries = st.keys.size();
  e.params = st.param_count;
  bool pointer_keys = !st.keys.empty();
  for (size_t i = 0; i < st.keys.size(); ++i) {
    const StateKey& k = st.keys[i];
    pointer_keys &= k.kind == KeyKind::kPtrShape || k.kind == KeyKind::kBarePtr;
    EntryEvidence ev;
    ev.key = i;
    ev.shape = k.shape;
    NodeId step = g.at(k.value).kind == NodeKind::kDict ? DictLookup(g, k.value, "step") : kNoNode;
    if (step != kNoNode) ev.step = NumberValue(cp, bytes, step);
    e.keys.push_back(std::move(ev));
  }
  if (!pointer_keys) {
    e.reason = "its keys are " + std::string(KeyKindName(st.scheme)) +
               " keys, not pointers, so no two parameters can have shared one by address";
    return e;
  }
  bool one_pointer = std::all_of(st.keys.begin(), st.keys.end(),
                                 [&](const StateKey& k) { return k.ptr == st.keys.front().ptr; });
  if (one_pointer) e.pointer = st.keys.front().ptr;
  if (e.entries >= e.params) {
    e.reason = "as many entries (" + std::to_string(e.entries) + ") as param_groups lists parameters";
    return e;
  }
  if (!one_pointer || (*e.pointer != 0 && e.entries < 2)) {
    e.reason = Count(e.entries, "entry", "entries") + " for " + Count(e.params, "parameter", "parameters") +
               ", keyed at different pointers: parameters without state (frozen, never stepped) look the "
               "same; a model or manifest decides";
    return e;
  }
  e.merged = true;
  std::string at = *e.pointer == 0 ? "pointer 0 (what FSDP and FSDP2 DTensor parameters report)"
                                   : "one pointer, " + std::to_string(*e.pointer);
  e.reason = Count(e.entries, "state entry", "state entries") + " for the " + Count(e.params, "parameter", "parameters") +
             " param_groups lists, every key at " + at + ": parameters of one shape shared one entry, so " +
             (e.params - e.entries == 1 ? std::string("1 parameter's")
                                        : std::to_string(e.params - e.entries) + " parameters'") +
             " state was merged into others'";

  // Counters: the slowest entry was stepped by one parameter per optimizer step
  // (or the group's own counter says how many steps ran); a merged entry's ran
  // a whole multiple of that.
  e.reference_step = GroupStep(cp, bytes, st);
  if (!e.reference_step) {
    for (const EntryEvidence& ev : e.keys) {
      if (ev.step && *ev.step > 0 && (!e.reference_step || *ev.step < *e.reference_step)) e.reference_step = ev.step;
    }
  }
  if (e.reference_step) {
    for (EntryEvidence& ev : e.keys) {
      if (!ev.step) continue;
      double ratio = *ev.step / *e.reference_step;
      if (ratio >= 2 && ratio == std::floor(ratio) && ratio < 1e9) ev.multiplicity = static_cast<int64_t>(ratio);
    }
  }
  return e;
}

}  // namespace optstate
