// The tensors migrate makes: storages computed when written (the step
// counter, 0.x SOAP's rotated exp_avg), views with 3.x's batch dimension over
// the input's bytes, SOAP's views as 3.x lays them out; and the writer that
// computes those storages one at a time.
#include <map>

#include "optstate/state_migrate.h"
#include "state/eigenbasis_projection.h"
#include "state/migrate_layout.h"

namespace optstate {
namespace {

std::vector<int64_t> WithBatchDim(const std::vector<int64_t>& v, int64_t lead) {
  std::vector<int64_t> out{lead};
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

}  // namespace

NodeId MigrateTensors::ComputedTensor(GraphBuilder& b, DType dtype, const std::vector<int64_t>& shape) {
  NodeId t = b.Tensor(dtype, shape);
  size_t storage = static_cast<size_t>(r_.checkpoint.tensors[r_.checkpoint.graph.at(t).tensor].storage);
  r_.checkpoint.storages[storage].computed = true;
  r_.computed.push_back(ComputedStorage{storage, 0, std::nullopt, {}});
  return t;
}

StatusOr<const TensorRef*> MigrateTensors::Float32Tensor(NodeId id, const std::string& where) {
  const ObjectGraph& g = r_.checkpoint.graph;
  if (id == kNoNode || g.at(id).kind != NodeKind::kTensor) {
    return InvalidArgumentError(where + " is not a tensor");
  }
  const TensorRef& t = r_.checkpoint.tensors[g.at(id).tensor];
  if (t.dtype != DType::kFloat32 || t.is_dtensor || t.storage < 0) {
    return UnsupportedError(where + " is " + std::string(GetDTypeInfo(t.dtype).name) +
                            (t.is_dtensor ? " DTensor" : "") + ": only float32 whole tensors are migrated");
  }
  return &t;
}

// A tensor (or None) with 3.x's leading batch dimension over the same bytes.
StatusOr<NodeId> MigrateTensors::Batched(GraphBuilder& b, NodeId id, const std::string& where) {
  ObjectGraph& g = r_.checkpoint.graph;
  if (id != kNoNode && g.at(id).kind == NodeKind::kNone) return b.New(NodeKind::kNone);
  OPTSTATE_ASSIGN_OR_RETURN(const TensorRef* t, Float32Tensor(id, where));
  TensorRef copy = *t;
  int64_t numel = 1;
  for (int64_t s : copy.sizes) numel *= s;
  return b.TensorOver(copy, WithBatchDim(copy.sizes, 1), WithBatchDim(copy.strides, numel));
}

// One 2.x SOAP view: already in the eigenbasis; renamed, batch dimension added.
Status MigrateTensors::Soap2View(GraphBuilder& b, NodeId fields, NodeId d, const std::string& where,
                 std::span<const FieldName> names) {
  ObjectGraph& g = r_.checkpoint.graph;
  for (const FieldName& f : names) {
    NodeId v = DictLookup(g, fields, f.legacy);
    if (v == kNoNode) return InvalidArgumentError(where + " has no " + f.legacy);
    if (g.at(v).kind == NodeKind::kList) {
      std::vector<NodeId> items = g.at(v).items, out;
      for (size_t i = 0; i < items.size(); ++i) {
        OPTSTATE_ASSIGN_OR_RETURN(NodeId x, Batched(b, items[i], where + " " + f.legacy + "[" + std::to_string(i) + "]"));
        out.push_back(x);
      }
      b.Set(d, f.heavyball3, b.List(std::move(out)));
    } else {
      OPTSTATE_ASSIGN_OR_RETURN(NodeId x, Batched(b, v, where + " " + f.legacy));
      b.Set(d, f.heavyball3, x);
    }
  }
  return Status();
}

// One 0.x or 1.x SOAP view: 0.x's exp_avg rotated (computed when written;
// 1.x's is in the eigenbasis already), the rest reshaped with 3.x's leading
// batch dimension; Q and GG per dimension, None where 3.x keeps no
// preconditioner (the old [] and 1x1 matrices).
Status MigrateTensors::SoapView(GraphBuilder& b, NodeId fields, NodeId d, const std::string& where,
                std::span<const FieldName> names, bool rotate) {
  ObjectGraph& g = r_.checkpoint.graph;
  const char* m_name = names[0].legacy;
  const char* v_name = names[1].legacy;
  OPTSTATE_ASSIGN_OR_RETURN(const TensorRef* m, Float32Tensor(DictLookup(g, fields, m_name), where + " " + m_name));
  OPTSTATE_ASSIGN_OR_RETURN(const TensorRef* v, Float32Tensor(DictLookup(g, fields, v_name), where + " " + v_name));
  const TensorRef moment = *m, second = *v;
  if (moment.sizes != second.sizes) return InvalidArgumentError(where + ": exp_avg and exp_avg_sq differ in shape");
  const size_t dims = moment.sizes.empty() ? 0 : moment.sizes.size();
  std::vector<std::optional<TensorRef>> bases(dims);
  std::vector<NodeId> qs, ggs;
  for (const char* list_name : {"Q", "GG"}) {
    NodeId list = DictLookup(g, fields, list_name);
    if (list == kNoNode || g.at(list).kind != NodeKind::kList) {
      return InvalidArgumentError(where + ": " + list_name + " is " + (list == kNoNode ? "missing" : "not a list") +
                                  " (an entry whose preconditioner was never built)");
    }
    std::vector<NodeId> items = g.at(list).items;
    if (items.size() != std::max<size_t>(dims, 1)) {
      return InvalidArgumentError(where + ": " + list_name + " has " + std::to_string(items.size()) +
                                  " matrices for a state of " + std::to_string(dims) + " dimensions");
    }
    for (size_t i = 0; i < items.size(); ++i) {
      NodeId item = items[i];
      const int64_t n = i < dims ? moment.sizes[i] : 0;
      // A dimension without a preconditioner: 0.x and 1.4 keep [], 1.6 None.
      if ((g.at(item).kind == NodeKind::kList && g.at(item).items.empty()) || g.at(item).kind == NodeKind::kNone) {
        (list_name[0] == 'Q' ? qs : ggs).push_back(b.New(NodeKind::kNone));
        continue;
      }
      std::string what = where + " " + list_name + "[" + std::to_string(i) + "]";
      OPTSTATE_ASSIGN_OR_RETURN(const TensorRef* t, Float32Tensor(item, what));
      if (t->sizes != std::vector<int64_t>{n, n}) {
        return InvalidArgumentError(what + " is not " + std::to_string(n) + "x" + std::to_string(n));
      }
      if (n == 1) {
        (list_name[0] == 'Q' ? qs : ggs).push_back(b.New(NodeKind::kNone));
        continue;
      }
      if (list_name[0] == 'Q') bases[i] = *t;
      OPTSTATE_ASSIGN_OR_RETURN(NodeId batched, Batched(b, item, what));
      (list_name[0] == 'Q' ? qs : ggs).push_back(batched);
    }
  }
  if (rotate) {
    NodeId rotated = ComputedTensor(b, DType::kFloat32, WithBatchDim(moment.sizes, 1));
    r_.computed.back().source = moment;
    r_.computed.back().bases = std::move(bases);
    b.Set(d, hb3::kSoapExpAvg, rotated);
  } else {  // 1.x kept it in the eigenbasis already
    OPTSTATE_ASSIGN_OR_RETURN(NodeId batched, Batched(b, DictLookup(g, fields, m_name), where + " " + m_name));
    b.Set(d, hb3::kSoapExpAvg, batched);
  }
  OPTSTATE_ASSIGN_OR_RETURN(NodeId second_batched,
                            Batched(b, DictLookup(g, fields, v_name), where + " " + v_name));
  b.Set(d, hb3::kSoapExpAvgSq, second_batched);
  b.Set(d, hb3::kSoapQ, b.List(std::move(qs)));
  b.Set(d, hb3::kSoapGG, b.List(std::move(ggs)));
  return Status();
}

StatusOr<WriteReport> WriteMigrated(const CheckpointFile& input, const MigrateResult& r, const std::string& path,
                                    const WriteOptions& options) {
  std::map<size_t, const ComputedStorage*> plans;
  for (const ComputedStorage& c : r.computed) plans[c.storage] = &c;
  std::vector<float> values;
  int64_t scalar = 0;
  auto compute = [&](size_t storage) -> StatusOr<ByteSpan> {
    auto it = plans.find(storage);
    if (it == plans.end()) return InternalError("storage " + std::to_string(storage) + " has no computation");
    const ComputedStorage& c = *it->second;
    if (!c.source) {
      scalar = c.int_value;
      return ByteSpan(reinterpret_cast<const std::byte*>(&scalar), sizeof scalar);
    }
    OPTSTATE_ASSIGN_OR_RETURN(std::vector<float> x, ReadTensorAsFloat(input.bytes(), r.checkpoint, *c.source));
    std::vector<Basis> bases(c.bases.size());
    for (size_t d = 0; d < c.bases.size(); ++d) {
      if (!c.bases[d]) continue;
      OPTSTATE_ASSIGN_OR_RETURN(bases[d], ReadTensorAsFloat(input.bytes(), r.checkpoint, *c.bases[d]));
      const auto n = static_cast<size_t>(c.source->sizes[d]);
      if (bases[d].size() != n * n) return InternalError("a basis does not match its dimension");
    }
    values = ProjectIntoEigenbasis(x, c.source->sizes, bases);
    return ByteSpan(reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(float));
  };
  return WriteCheckpoint(input, r.checkpoint, r.checkpoint.graph.root, path, compute, options);
}

}  // namespace optstate
