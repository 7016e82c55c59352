#include "optstate/collisions.h"

#include <map>
#include <set>

#include "optstate/params.h"
#include "torch/graph_builder.h"

namespace optstate {
namespace {

class Remapper {
 public:
  Remapper(Checkpoint cp, const OptimizerState& st, const std::vector<ParamInfo>& params, const MatchReport& m,
           const RemapOptions& o)
      : st_(st), params_(params), m_(m), o_(o) {
    r_.checkpoint = std::move(cp);
  }

  StatusOr<RemapResult> Run() {
    OPTSTATE_RETURN_IF_ERROR(Refusals());
    if (o_.to == KeyTarget::kFqn) {
      std::vector<std::string> names;
      for (const ParamInfo& p : params_) names.push_back(p.name);
      fqns_ = CanonicalFqns(names);
    }
    ObjectGraph& g = r_.checkpoint.graph;
    r_.entries.resize(st_.keys.size());
    for (size_t i = 0; i < st_.keys.size(); ++i) r_.entries[i].input_key = st_.keys[i].text;

    NodeId state = New(NodeKind::kDict);
    for (size_t p = 0; p < params_.size(); ++p) {
      const ParamMatch& pm = m_.params[p];
      if (pm.keys.empty()) continue;
      if (pm.collided) {
        if (o_.on_collision == CollisionPolicy::kDrop) continue;  // dropped below, with the reason
        bool reset = o_.on_collision == CollisionPolicy::kReset;
        NodeId copy = Copy(st_.keys[pm.keys.front()].value, reset, 0);
        NodeId key = o_.to == KeyTarget::kIndex ? Int(static_cast<int64_t>(p)) : Str(fqns_[p]);
        g.at(state).entries.emplace_back(key, copy);
        RemapEntry& e = r_.entries[pm.keys.front()];
        e.fate = reset ? "reset" : "shared";
        e.output_keys.push_back(o_.to == KeyTarget::kIndex ? std::to_string(p) : fqns_[p]);
        e.params.push_back(params_[p].name);
        continue;
      }
      NodeId value;
      if (pm.keys.size() == 1) {
        value = st_.keys[pm.keys[0]].value;
      } else {
        value = New(NodeKind::kDict);  // HeavyBall 2.x/3.x: {view: {...}}
        for (size_t v = 0; v < pm.keys.size(); ++v) {
          NodeId view = Int(static_cast<int64_t>(v));  // before g.at(): New() may move the arena
          g.at(value).entries.emplace_back(view, st_.keys[pm.keys[v]].value);
        }
      }
      NodeId key = o_.to == KeyTarget::kIndex ? Int(static_cast<int64_t>(p)) : Str(fqns_[p]);
      g.at(state).entries.emplace_back(key, value);
      for (size_t v = 0; v < pm.keys.size(); ++v) {
        RemapEntry& e = r_.entries[pm.keys[v]];
        e.fate = "moved";
        e.output_key = o_.to == KeyTarget::kIndex ? std::to_string(p) : fqns_[p];
        e.view = pm.keys.size() > 1 ? static_cast<int64_t>(v) : -1;
        e.params = {params_[p].name};
        ++r_.moved;
      }
    }
    for (size_t i = 0; i < st_.keys.size(); ++i) {
      RemapEntry& e = r_.entries[i];
      if (e.fate == "shared" || e.fate == "reset") {
        e.reason = m_.keys[i].reason;
        ++(e.fate == "shared" ? r_.shared : r_.reset);
      }
      if (!e.fate.empty()) continue;
      e.fate = "dropped";
      for (size_t p : m_.CandidatesOf(i)) e.params.push_back(params_[p].name);
      e.reason = m_.keys[i].reason.empty() ? "belongs to no parameter" : m_.keys[i].reason;
      ++r_.dropped;
    }
    SeparateSharedSteps(r_.checkpoint, state);
    // The optimizer dict keeps its other entries; state and params are replaced.
    Node& osd = g.at(st_.node);
    for (auto& [k, v] : osd.entries) {
      if (g.at(k).kind == NodeKind::kStr && g.at(k).text == "state") v = state;
    }
    RewriteGroups();
    return std::move(r_);
  }

 private:
  Status Refusals() {
    if (!m_.ambiguous.empty()) {
      return InvalidArgumentError(std::to_string(m_.ambiguous.size()) + " state entries cannot be placed: " +
                                  m_.keys[m_.ambiguous.front()].reason);
    }
    if (m_.collisions.empty()) return Status();
    if (o_.on_collision == CollisionPolicy::kFail) {
      std::string names;
      for (const CollisionGroup& c : m_.collisions) {
        names += names.empty() ? "" : "; ";
        for (size_t i = 0; i < c.params.size(); ++i) names += (i ? ", " : "") + params_[c.params[i]].name;
      }
      return InvalidArgumentError("state was merged across parameters (" + names +
                                  "); choose --on-collision drop, share or reset");
    }
    for (const CollisionGroup& c : m_.collisions) {
      if (c.keys.size() != 1 && o_.on_collision != CollisionPolicy::kDrop) {
        return InvalidArgumentError(std::to_string(c.keys.size()) + " merged entries for " +
                                    std::to_string(c.params.size()) +
                                    " parameters: no single entry to share or reset from; use drop");
      }
    }
    return Status();
  }

  // Optimizer state values are a few levels deep; a value that contains itself
  // (possible in a hostile pickle) must not recurse forever.
  static constexpr int kMaxValueDepth = 256;

  // A copy of a state value that owns its tensors: each tensor gets a new
  // storage (zero-filled for reset); tensors sharing a storage within the value
  // keep sharing their copy. Scalars are immutable and reused, except int/float
  // `step` fields, which reset sets to 0.
  NodeId Copy(NodeId id, bool reset, int depth) {
    ObjectGraph& g = r_.checkpoint.graph;
    Node n = g.at(id);  // a copy: New() may move the arena
    if (depth == 0) storage_copies_.clear();
    if (depth > kMaxValueDepth) return id;  // a cycle; the pickle writer refuses it with a clear error
    switch (n.kind) {
      case NodeKind::kTensor: {
        TensorRef t = r_.checkpoint.tensors[n.tensor];
        if (t.is_dtensor) return CopyDTensor(n, reset, depth);
        if (t.storage >= 0) {
          auto it = storage_copies_.find(t.storage);
          if (it == storage_copies_.end()) {
            StorageRef s = r_.checkpoint.storages[static_cast<size_t>(t.storage)];
            s.zero_fill = s.zero_fill || reset;
            r_.checkpoint.storages.push_back(s);
            it = storage_copies_.emplace(t.storage, static_cast<int64_t>(r_.checkpoint.storages.size() - 1)).first;
          }
          t.storage = it->second;
        }
        r_.checkpoint.tensors.push_back(t);
        NodeId out = New(NodeKind::kTensor);
        g.at(out).tensor = static_cast<uint32_t>(r_.checkpoint.tensors.size() - 1);
        g.at(out).text = n.text;
        return out;
      }
      case NodeKind::kDict:
      case NodeKind::kList:
      case NodeKind::kTuple: {
        std::vector<std::pair<NodeId, NodeId>> entries;
        for (auto [k, v] : n.entries) {
          bool step = reset && g.at(k).kind == NodeKind::kStr && g.at(k).text == "step" &&
                      (g.at(v).kind == NodeKind::kInt || g.at(v).kind == NodeKind::kFloat);
          NodeId value = step ? Zero(g.at(v).kind) : Copy(v, reset, depth + 1);
          entries.emplace_back(k, value);
        }
        std::vector<NodeId> items;
        for (NodeId i : n.items) items.push_back(Copy(i, reset, depth + 1));
        NodeId out = New(n.kind);
        if (!n.class_name().empty()) g.at(out).set_class_name(n.class_name());
        g.at(out).entries = std::move(entries);
        g.at(out).items = std::move(items);
        if (n.state() != kNoNode) g.at(out).extra().state = n.state();
        return out;
      }
      default:
        return id;
    }
  }

  // A DTensor is written back as the call that built it,
  // _rebuild_from_type_v2(func, DTensor, args, state), whose state holds the
  // local shard: the copy keeps the call (class, global size, spec and mesh are
  // shared, as torch itself shares one mesh) around a copy of the local tensor.
  NodeId CopyDTensor(const Node& n, bool reset, int depth) {
    NodeId args = n.args() == kNoNode ? kNoNode : Copy(n.args(), reset, depth + 1);
    NodeId state = n.state() == kNoNode ? kNoNode : Copy(n.state(), reset, depth + 1);
    TensorRef t = r_.checkpoint.tensors[n.tensor];
    auto it = storage_copies_.find(t.storage);
    if (it != storage_copies_.end()) t.storage = it->second;  // the local tensor's copy, made just above
    r_.checkpoint.tensors.push_back(t);
    NodeId out = New(NodeKind::kTensor);
    Node& o = r_.checkpoint.graph.at(out);
    o = n;
    o.tensor = static_cast<uint32_t>(r_.checkpoint.tensors.size() - 1);
    o.set_args(args);
    o.extra().state = state;
    return out;
  }

  NodeId Zero(NodeKind kind) {
    NodeId id = New(kind);
    return id;  // kInt 0 / kFloat 0.0 by default
  }

  NodeId New(NodeKind kind) {
    ObjectGraph& g = r_.checkpoint.graph;
    Node n;
    n.kind = kind;
    g.nodes.push_back(std::move(n));
    return static_cast<NodeId>(g.nodes.size() - 1);
  }
  NodeId Int(int64_t v) {
    NodeId id = New(NodeKind::kInt);
    r_.checkpoint.graph.at(id).int_value = v;
    return id;
  }
  NodeId Str(const std::string& s) {
    NodeId id = New(NodeKind::kStr);
    r_.checkpoint.graph.at(id).text = s;
    return id;
  }

  // params lists become indices (in group order, as torch.optim numbers them)
  // or FQN lists (as DCP's state_dict writes them).
  void RewriteGroups() {
    ObjectGraph& g = r_.checkpoint.graph;
    NodeId groups = DictLookup(g, st_.node, "param_groups");
    size_t next = 0;
    std::vector<NodeId> group_ids = g.at(groups).items;
    for (NodeId group : group_ids) {
      // Find the entry first: New() below may move the node arena, so no
      // reference into it is held across those calls.
      size_t slot = SIZE_MAX;
      for (size_t e = 0; e < g.at(group).entries.size(); ++e) {
        NodeId k = g.at(group).entries[e].first;
        if (g.at(k).kind == NodeKind::kStr && g.at(k).text == "params") slot = e;
      }
      if (slot == SIZE_MAX) continue;
      size_t count = g.at(g.at(group).entries[slot].second).items.size();
      std::vector<NodeId> items;
      for (size_t i = 0; i < count; ++i) {
        size_t p = next + i;
        items.push_back(o_.to == KeyTarget::kIndex ? Int(static_cast<int64_t>(p)) : Str(fqns_[p]));
      }
      NodeId list = New(NodeKind::kList);
      g.at(list).items = std::move(items);
      g.at(group).entries[slot].second = list;
      next += count;
    }
  }

  const OptimizerState& st_;
  const std::vector<ParamInfo>& params_;
  const MatchReport& m_;
  const RemapOptions& o_;
  RemapResult r_;
  std::vector<std::string> fqns_;  // --to fqn: each parameter's name as torch's DSD spells it
  std::map<int64_t, int64_t> storage_copies_;  // input storage -> its copy, within one Copy()
};

}  // namespace

size_t SeparateSharedSteps(Checkpoint& checkpoint, NodeId state) {
  ObjectGraph& g = checkpoint.graph;
  GraphBuilder b(checkpoint);
  size_t separated = 0;
  std::set<int64_t> seen;  // storages of the step tensors met so far
  if (state == kNoNode || g.at(state).kind != NodeKind::kDict) return 0;
  const size_t entries = g.at(state).entries.size();
  for (size_t e = 0; e < entries; ++e) {
    NodeId value = g.at(state).entries[e].second;
    if (g.at(value).kind != NodeKind::kDict) continue;
    for (size_t i = 0; i < g.at(value).entries.size(); ++i) {
      auto [k, v] = g.at(value).entries[i];
      if (g.at(k).kind != NodeKind::kStr || g.at(k).text != "step" || g.at(v).kind != NodeKind::kTensor) continue;
      TensorRef t = checkpoint.tensors[g.at(v).tensor];
      if (t.is_dtensor || t.storage < 0 || seen.insert(t.storage).second) continue;
      checkpoint.storages.push_back(checkpoint.storages[static_cast<size_t>(t.storage)]);
      t.storage = static_cast<int32_t>(checkpoint.storages.size() - 1);
      checkpoint.tensors.push_back(t);
      CompactText label = g.at(v).text;
      NodeId step = b.New(NodeKind::kTensor);
      g.at(step).tensor = static_cast<uint32_t>(checkpoint.tensors.size() - 1);
      g.at(step).text = label;
      Node copy = g.at(value);  // a copy: the builder may move the arena
      NodeId fresh = b.Dict(copy.class_name().str());
      g.at(fresh).entries = copy.entries;
      g.at(fresh).entries[i].second = step;
      g.at(state).entries[e].second = fresh;
      ++separated;
      break;
    }
  }
  return separated;
}

StatusOr<RemapResult> RemapState(const Checkpoint& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchReport& match,
                                 const RemapOptions& options) {
  Remapper r(checkpoint, state, params, match, options);
  return r.Run();
}

StatusOr<RemapResult> RemapState(Checkpoint&& checkpoint, const OptimizerState& state,
                                 const std::vector<ParamInfo>& params, const MatchReport& match,
                                 const RemapOptions& options) {
  Remapper r(std::move(checkpoint), state, params, match, options);
  return r.Run();
}

}  // namespace optstate
