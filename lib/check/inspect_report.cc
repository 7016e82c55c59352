#include "optstate/inspect_report.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "optstate/params.h"
#include "pickle/graph_walk.h"
#include "torch/shard_layout.h"

namespace optstate {
namespace {

// "int", "str", "(int, tuple[int])", "tensor": the shape of a state key's type.
std::string KeySignature(const ObjectGraph& g, NodeId id, int depth = 0) {
  const Node& n = g.at(id);
  if (n.kind != NodeKind::kTuple || depth > 3) return TypeName(g, id);
  bool all_int = !n.items.empty() && std::all_of(n.items.begin(), n.items.end(), [&](NodeId i) {
    return g.at(i).kind == NodeKind::kInt;
  });
  if (all_int && depth > 0) return "tuple[int]";
  std::string s = "(";
  for (size_t i = 0; i < n.items.size(); ++i) s += (i ? ", " : "") + KeySignature(g, n.items[i], depth + 1);
  return s + ")";
}

class Builder {
 public:
  Builder(const Checkpoint& cp, const TensorBytesReader& read, const InspectReportOptions& o)
      : read_(read), cp_(cp), g_(cp_.graph), opt_(o), storage_users_(cp_.storages.size(), 0) {
    for (const TensorRef& t : cp_.tensors) {
      if (t.storage >= 0 && !t.inside_dtensor) ++storage_users_[static_cast<size_t>(t.storage)];
    }
  }

  StatusOr<InspectReport> Run() {
    InspectReport r;
    for (const TensorRef& t : cp_.tensors) {
      if (t.inside_dtensor) continue;  // counted through its DTensor
      ++r.tensors;
      r.tensor_bytes += t.nbytes();
    }
    for (const StorageRef& s : cp_.storages) r.storage_bytes += s.nbytes;
    r.root_path = opt_.path;
    std::optional<NodeId> start = FindPath(g_, g_.root, opt_.path);
    if (!start) return NotFoundError("no object at path '" + opt_.path + "'");
    BuildTree(*start, r);
    WalkTree(g_, g_.root, 8, [&](const WalkStep& s) {
      if (!s.repeat && IsOptimizerStateDict(g_, s.id)) {
        r.optimizers.push_back(Summarise(s.path, s.id));
        return false;
      }
      return true;
    });
    return r;
  }

 private:
  std::string Label(const WalkStep& s) const {
    if (s.depth == 0) return "";
    if (s.key != kNoNode) {
      const Node& k = g_.at(s.key);
      return k.kind == NodeKind::kStr ? k.text.str() : KeyText(g_, s.key);
    }
    size_t dot = s.path.rfind('.');
    size_t bracket = s.path.rfind('[');
    size_t cut = dot == std::string::npos ? bracket : bracket == std::string::npos ? dot : std::max(dot, bracket);
    return cut == std::string::npos ? s.path : s.path.substr(s.path[cut] == '.' ? cut + 1 : cut);
  }

  std::string Summary(NodeId id, std::string& type) const {
    const Node& n = g_.at(id);
    type = TypeName(g_, id);
    switch (n.kind) {
      case NodeKind::kDict: {
        std::string s = std::to_string(n.entries.size()) + (n.entries.size() == 1 ? " entry" : " entries");
        std::string keys;  // a preview of short string keys helps more than a count
        for (auto [k, v] : n.entries) {
          if (g_.at(k).kind != NodeKind::kStr || keys.size() > 60) return s;
          keys += (keys.empty() ? "" : ", ") + g_.at(k).text;
        }
        return keys.empty() || keys.size() > 60 ? s : s + ": " + keys;
      }
      case NodeKind::kList:
      case NodeKind::kTuple:
      case NodeKind::kSet:
      case NodeKind::kFrozenSet:
        if (ShownInline(id)) return ValueText(g_, id, 60);
        return std::to_string(n.items.size()) + (n.items.size() == 1 ? " item" : " items");
      case NodeKind::kTensor: {
        const TensorRef& t = cp_.tensors[n.tensor];
        type = t.is_dtensor ? t.sharded_kind() : t.is_parameter ? "Parameter" : "tensor";
        std::string s = std::string(GetDTypeInfo(t.dtype).name) + " " + ShapeText(t.sizes) + " " + HumanBytes(t.nbytes());
        if (t.explicit_block()) {
          s = std::string(GetDTypeInfo(t.dtype).name) + " " + ShapeText(t.global_sizes()) + ", " +
              (t.holds_no_block() ? std::string("no block on this rank")
                                  : "block " + ShapeText(t.sizes) + " at " + ShapeText(t.block_offsets()) + " " +
                                        HumanBytes(t.nbytes())) +
              (t.mesh_shape().empty() || t.mesh_coordinate().empty()
                   ? ""
                   : " (rank " + std::to_string(t.mesh_coordinate()[0]) + " of " + std::to_string(t.mesh_shape()[0]) +
                         ")");
        } else if (t.is_dtensor) {
          std::string placements = PlacementsText(t.placements());
          s = std::string(GetDTypeInfo(t.dtype).name) + " " + ShapeText(t.global_sizes()) + " as " + placements +
              " on mesh " + ShapeText(t.mesh_shape()) + "; local shard " + ShapeText(t.sizes) + " " +
              HumanBytes(t.nbytes());
        }
        if (t.holds_no_block()) return s;
        if (t.storage < 0) return s + " (meta, no data)";
        const StorageRef& st = cp_.storages[static_cast<size_t>(t.storage)];
        if (t.storage_offset != 0 || t.nbytes() != st.nbytes) {
          s += ", view at element " + std::to_string(t.storage_offset) + " of storage " + st.key + " (" + HumanBytes(st.nbytes) + ")";
        } else if (storage_users_[static_cast<size_t>(t.storage)] > 1) {
          size_t others = storage_users_[static_cast<size_t>(t.storage)] - 1;
          s += ", shares storage " + st.key + " with " + std::to_string(others) +
               (others == 1 ? " other tensor" : " other tensors");
        }
        if (t.sizes.empty() && st.located) s += " = " + ScalarValue(t);
        return s;
      }
      case NodeKind::kObject:
        // optstate records the call and never makes it; torch.load(weights_only=False) would.
        return "a call (not run here); arguments " +
               (n.args() == kNoNode ? std::string("none") : ValueText(g_, n.args(), 50));
      default: return ValueText(g_, id, 60);
    }
  }

  // A short sequence of scalars is shown as its value, without child lines.
  bool ShownInline(NodeId id) const {
    const Node& n = g_.at(id);
    bool sequence = n.kind == NodeKind::kList || n.kind == NodeKind::kTuple || n.kind == NodeKind::kSet ||
                    n.kind == NodeKind::kFrozenSet;
    return sequence && n.items.size() <= 16 && std::all_of(n.items.begin(), n.items.end(), [&](NodeId i) {
      NodeKind k = g_.at(i).kind;
      return k == NodeKind::kInt || k == NodeKind::kFloat || k == NodeKind::kBool || k == NodeKind::kStr ||
             k == NodeKind::kNone || k == NodeKind::kBigInt ||
             (k == NodeKind::kTuple && g_.at(i).items.size() <= 4 && ShownInline(i));
    });
  }

  std::string ScalarValue(const TensorRef& t) const {
    StatusOr<std::vector<std::byte>> b = read_(t);
    if (!b.ok() || b->empty()) return "?";
    if (t.dtype == DType::kFloat32) {
      float f;
      std::memcpy(&f, b->data(), 4);
      return ValueTextOfDouble(f);
    }
    if (t.dtype == DType::kFloat64) {
      double d;
      std::memcpy(&d, b->data(), 8);
      return ValueTextOfDouble(d);
    }
    if (t.dtype == DType::kInt64) {
      int64_t v;
      std::memcpy(&v, b->data(), 8);
      return std::to_string(v);
    }
    return "?";
  }

  static std::string ValueTextOfDouble(double v) {
    ObjectGraph tmp;
    Node n;
    n.kind = NodeKind::kFloat;
    n.float_value = v;
    tmp.nodes.push_back(n);
    return ValueText(tmp, 0, 30);
  }

  void BuildTree(NodeId start, InspectReport& r) {
    std::vector<size_t> open;  // per depth: index in r.tree of the last line
    WalkTree(g_, start, opt_.depth, [&](const WalkStep& s) {
      if (s.index >= opt_.max_items) {
        if (s.index == opt_.max_items) {
          TreeLine more;
          more.depth = s.depth;
          more.more = s.siblings - opt_.max_items;
          more.last = true;
          r.tree.push_back(more);
        }
        return false;
      }
      TreeLine line;
      line.path = s.path;
      line.label = Label(s);
      line.depth = s.depth;
      line.summary = Summary(s.id, line.type);
      line.last = s.index + 1 == s.siblings || (s.index + 1 == opt_.max_items && s.siblings == opt_.max_items);
      if (s.repeat) line.same_as = s.first_path.empty() ? "(root)" : s.first_path;
      r.tree.push_back(std::move(line));
      return !s.repeat && !ShownInline(s.id);
    });
  }

  OptimizerSummary Summarise(const std::string& path, NodeId osd) {
    OptimizerSummary o;
    o.path = path;
    // IsOptimizerStateDict checked that both exist.
    const Node& state = g_.at(DictLookup(g_, osd, "state"));
    const Node& groups = g_.at(DictLookup(g_, osd, "param_groups"));
    o.state_entries = state.entries.size();
    std::map<std::string, size_t> key_types;
    std::map<std::string, StateField> fields;
    std::vector<std::string> field_order;
    std::set<std::string> steps;
    auto add_fields = [&](const Node& per_param) {
      for (auto [k, v] : per_param.entries) {
        std::string name = KeyText(g_, k);
        if (!fields.contains(name)) field_order.push_back(name);
        StateField& f = fields[name];
        f.name = name;
        ++f.count;
        const Node& val = g_.at(v);
        std::string dtype;
        if (val.kind == NodeKind::kTensor) {
          const TensorRef& t = cp_.tensors[val.tensor];
          dtype = GetDTypeInfo(t.dtype).name;
          f.bytes += t.nbytes();
          if (t.sizes.empty()) {
            ++f.scalars;
            if (name == "step") {
              ++o.steps_total;
              if (o.steps_read < opt_.max_step_reads && steps.size() < 8) {
                ++o.steps_read;
                steps.insert(ScalarValue(t));
              }
            }
          }
        } else {
          dtype = TypeName(g_, v);
          if (val.kind == NodeKind::kInt || val.kind == NodeKind::kFloat) {
            ++f.scalars;
            if (name == "step" && steps.size() < 8) steps.insert(ValueText(g_, v));
          }
        }
        if (std::find(f.dtypes.begin(), f.dtypes.end(), dtype) == f.dtypes.end()) f.dtypes.push_back(dtype);
      }
    };
    for (auto [k, v] : state.entries) {
      ++key_types[KeySignature(g_, k)];
      const Node& per_param = g_.at(v);
      if (per_param.kind != NodeKind::kDict) continue;
      // HeavyBall 2.x/3.x: {index: {view_idx: {name: value}}}
      bool nested = !per_param.entries.empty() && std::all_of(per_param.entries.begin(), per_param.entries.end(),
          [&](auto e) { return g_.at(e.first).kind == NodeKind::kInt && g_.at(e.second).kind == NodeKind::kDict; });
      if (nested) {
        o.nested_views = true;
        for (auto [vk, vv] : per_param.entries) add_fields(g_.at(vv));
      } else {
        add_fields(per_param);
      }
    }
    o.key_types.assign(key_types.begin(), key_types.end());
    for (const std::string& name : field_order) o.fields.push_back(fields[name]);
    o.step_values.assign(steps.begin(), steps.end());
    for (NodeId gid : groups.items) {
      GroupSummary gs;
      for (auto [k, v] : g_.at(gid).entries) {
        std::string name = KeyText(g_, k);
        if (name == "params") {
          gs.params = g_.at(v).items.size();
          continue;
        }
        gs.hyperparameters.emplace_back(name, ValueText(g_, v, 40));
      }
      o.group_params += gs.params;
      o.groups.push_back(std::move(gs));
    }
    return o;
  }

  const TensorBytesReader& read_;
  const Checkpoint& cp_;
  const ObjectGraph& g_;
  const InspectReportOptions& opt_;
  std::vector<size_t> storage_users_;  // tensors per storage
};

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[u]);
  return buf;
}

StatusOr<InspectReport> BuildInspectReport(const CheckpointFile& file, const InspectReportOptions& options) {
  TensorBytesReader read = [&file](const TensorRef& t) { return ReadTensorBytes(file.bytes(), file.checkpoint(), t); };
  return BuildInspectReport(file.checkpoint(), read, options);
}

StatusOr<InspectReport> BuildInspectReport(const Checkpoint& checkpoint, const TensorBytesReader& read,
                                           const InspectReportOptions& options) {
  Builder b(checkpoint, read, options);
  return b.Run();
}

}  // namespace optstate
