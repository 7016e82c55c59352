#include "optstate/zero.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "io/staging_directory.h"
#include "torch/checkpoint_share.h"
#include "torch/graph_builder.h"
#include "zero/zero_graph.h"

namespace optstate {
namespace {

// What one storage of the output is made of, decided while the graph is
// built and read when the writer asks for its bytes.
struct StoragePlan {
  enum class Kind { kFragments, kModelTensor, kBytes } kind = Kind::kBytes;
  size_t param = 0;        // kFragments: which parameter
  std::string field;       // kFragments: "" for the fp32 weights, else the state field
  const CheckpointFile* file = nullptr;  // kModelTensor
  NodeId node = kNoNode;                 // kModelTensor
  std::vector<std::byte> bytes;          // kBytes (a step's 4 bytes)
};

class Consolidator {
 public:
  Consolidator(const ZeroCheckpoint& z, const ZeroConsolidateOptions& o) : z_(z), o_(o), b_(cp_) {}

  Status Build() {
    NodeId root = b_.Dict();
    NodeId model = b_.Dict("collections.OrderedDict");
    OPTSTATE_RETURN_IF_ERROR(BuildModel(model));
    b_.Set(root, "model", model);
    NodeId optimizer = b_.Dict();
    OPTSTATE_RETURN_IF_ERROR(BuildOptimizer(optimizer));
    b_.Set(root, "optimizer", optimizer);
    cp_.graph.root = root;
    return Status();
  }

  StatusOr<ZeroConsolidateReport> Write(const std::string& output) {
    auto source = [this](size_t storage) -> StatusOr<std::vector<RecordPiece>> { return Pieces(storage); };
    // Each piece's pages are dropped once written (the writer reads them for
    // the record's CRC): resident memory stays that of one record, not of the
    // checkpoint. A range belongs to one file; the others ignore it.
    auto release = [this](ByteSpan range) {
      if (z_.model) z_.model->ReleasePages(range);
      for (const ZeroRank& r : z_.ranks) {
        if (r.optim) r.optim->ReleasePages(range);
        if (r.model) r.model->ReleasePages(range);
      }
    };
    if (o_.coordinator && o_.coordinator->size() > 1) {
      OPTSTATE_ASSIGN_OR_RETURN(report_.write, WriteCheckpointTogether(cp_, cp_.graph.root, output, o_.write, source,
                                                                       release, *o_.coordinator, report_.unconfirmed,
                                                                       [this](uint64_t share) { share_ = share; }));
      return report_;
    }
    OPTSTATE_RETURN_IF_ERROR(StagingDirectory::RefuseIfBusy(output));
    OPTSTATE_ASSIGN_OR_RETURN(report_.write,
                              WriteNewCheckpointFromPieces(cp_, cp_.graph.root, output, source, o_.write, release));
    return report_;
  }

 private:
  // The model's state_dict order: the `module` entry of the model states.
  Status BuildModel(NodeId model) {
    const ObjectGraph& mg = z_.model->checkpoint().graph;
    NodeId module = DictLookup(mg, mg.root, "module");
    std::unordered_map<std::string, size_t> param_index;
    for (size_t i = 0; i < z_.params.size(); ++i) param_index.emplace(z_.params[i].name, i);
    std::unordered_map<std::string, NodeId> written;
    std::vector<std::string> order;
    if (IsDictNode(mg, module)) {
      for (const auto& [k, v] : mg.at(module).entries) {
        if (mg.at(k).kind == NodeKind::kStr) order.push_back(mg.at(k).text);
      }
    }
    for (const ZeroParam& p : z_.params) {  // parameters the module entry leaves out go last
      bool listed = false;
      for (const std::string& n : order) listed |= n == p.name;
      if (!listed) order.push_back(p.name);
    }
    for (const std::string& name : order) {
      auto it = param_index.find(name);
      if (it != param_index.end()) {
        const ZeroParam& p = z_.params[it->second];
        NodeId t = FragmentTensor(it->second, "", DType::kFloat32);
        if (p.group < 0) ++report_.frozen; else ++report_.trainable;
        written[name] = t;
        b_.Set(model, name, t);
        continue;
      }
      bool buffer = false;
      for (const std::string& bname : z_.buffer_names) buffer |= bname == name;
      bool alias = false;
      for (const auto& [a, src] : z_.shared_params) alias |= a == name;
      // Aliases come below. Stage 3's module holds empty placeholders of
      // parameters; stages 1, 2 hold every parameter whole, so an entry that
      // is neither a listed parameter nor a buffer is a frozen parameter
      // ZeRO-1 did not list (its frozen_param_shapes is None): kept as saved.
      if (alias || (!buffer && z_.stage == 3)) continue;
      NodeId src = DictLookup(mg, module, name);
      if (src == kNoNode || mg.at(src).kind != NodeKind::kTensor) continue;
      const TensorRef& ref = z_.model->checkpoint().tensors[mg.at(src).tensor];
      if (!buffer && ref.numel() == 0) continue;
      NodeId t = b_.Tensor(ref.dtype, ref.sizes);
      StoragePlan plan;
      plan.kind = StoragePlan::Kind::kModelTensor;
      plan.file = z_.model.get();
      plan.node = src;
      AddPlan(std::move(plan), ref.nbytes());
      written[name] = t;
      b_.Set(model, name, t);
      if (buffer) {
        ++report_.buffers;
      } else {
        ++report_.frozen;
        report_.unlisted_frozen.push_back(name);
      }
    }
    for (const auto& [alias, src] : z_.shared_params) {  // tied weights: one storage, as zero_to_fp32 shares it
      auto it = written.find(src);
      if (it == written.end()) continue;
      TensorRef base = cp_.tensors[cp_.graph.at(it->second).tensor];
      b_.Set(model, alias, b_.TensorOver(base, base.sizes, base.strides));
      ++report_.shared;
    }
    return Status();
  }

  Status BuildOptimizer(NodeId optimizer) {
    const ZeroRank* ref = nullptr;
    uint32_t ref_rank = 0;
    for (uint32_t r = 0; r < z_.ranks.size() && ref == nullptr; ++r) {
      if (z_.ranks[r].optim) ref = &z_.ranks[r], ref_rank = r;
    }
    if (ref == nullptr) return CorruptError(z_.dir + ": no rank's optimizer file could be read");
    const ObjectGraph& rg = ref->optim->checkpoint().graph;
    NodeId saved_groups = DictLookup(rg, ref->optimizer_state_dict, "param_groups");
    NodeId state = b_.Dict();
    NodeId groups = b_.List({});
    int64_t index = 0;
    for (size_t g = 0; g < z_.groups.size(); ++g) {
      NodeId group = b_.Dict();
      NodeId saved = IsSequence(rg, saved_groups) && g < rg.at(saved_groups).items.size() ? rg.at(saved_groups).items[g]
                                                                                         : kNoNode;
      if (IsDictNode(rg, saved)) {
        for (const auto& [k, v] : rg.at(saved).entries) {
          if (rg.at(k).kind != NodeKind::kStr || rg.at(k).text == "params") continue;
          StatusOr<NodeId> value = b_.Import(rg, v);
          if (!value.ok()) return std::move(value).status().WithContext(ref->optim_path + ": param_groups[" + std::to_string(g) + "]." + rg.at(k).text);
          b_.Set(group, rg.at(k).text, *value);
        }
      }
      std::vector<NodeId> params;
      for (size_t pi : z_.groups[g].params) {
        NodeId key = o_.keys == ZeroStateKeys::kIndex ? b_.Int(index) : b_.Str(z_.params[pi].name);
        NodeId listed = o_.keys == ZeroStateKeys::kIndex ? b_.Int(index) : b_.Str(z_.params[pi].name);
        ++index;
        params.push_back(listed);
        NodeId entry = b_.Dict();
        for (const std::string& field : StateFieldsOf(g)) {
          NodeId t = FragmentTensor(pi, field, PartitionDType(ref_rank, g, field));
          b_.Set(entry, field, t);
        }
        if (!std::isnan(ref->steps[g])) {
          NodeId step = b_.Tensor(DType::kFloat32, {});
          StoragePlan plan;
          float v = static_cast<float>(ref->steps[g]);
          plan.bytes.resize(sizeof v);
          std::memcpy(plan.bytes.data(), &v, sizeof v);
          AddPlan(std::move(plan), sizeof v);
          b_.Set(entry, "step", step);
          NoteField("step");
        }
        b_.Set(state, key, entry);
        ++report_.state_entries;
      }
      NodeId list = b_.List(std::move(params));
      b_.Set(group, "params", list);
      cp_.graph.at(groups).items.push_back(group);
    }
    b_.Set(optimizer, "state", state);
    b_.Set(optimizer, "param_groups", groups);
    return Status();
  }

  std::vector<std::string> StateFieldsOf(size_t g) {
    for (const std::string& f : z_.groups[g].state_fields) NoteField(f);
    return z_.groups[g].state_fields;
  }

  void NoteField(const std::string& f) {
    for (const std::string& s : report_.state_fields) {
      if (s == f) return;
    }
    report_.state_fields.push_back(f);
  }

  DType PartitionDType(uint32_t rank, size_t g, const std::string& field) {
    NodeId t = ZeroStateTensor(z_, rank, g, field);
    const Checkpoint& cp = z_.ranks[rank].optim->checkpoint();
    return t == kNoNode ? DType::kFloat32 : cp.tensors[cp.graph.at(t).tensor].dtype;
  }

  NodeId FragmentTensor(size_t param, const std::string& field, DType dtype) {
    const ZeroParam& p = z_.params[param];
    NodeId t = b_.Tensor(p.group < 0 ? FrozenDType(p) : dtype, p.shape);
    StoragePlan plan;
    plan.kind = StoragePlan::Kind::kFragments;
    plan.param = param;
    plan.field = field;
    AddPlan(std::move(plan), cp_.storages.back().nbytes);
    return t;
  }

  // A frozen parameter keeps the dtype it was saved in.
  DType FrozenDType(const ZeroParam& p) {
    const auto [file, t] = FindFrozenTensor(z_, p.name, 0);
    return t == kNoNode ? DType::kFloat32 : file->checkpoint().tensors[file->checkpoint().graph.at(t).tensor].dtype;
  }

  void AddPlan(StoragePlan plan, uint64_t bytes) {
    plans_.push_back(std::move(plan));
    report_.tensor_bytes += bytes;
  }

  // The bytes of a tensor node of `file`, which must lie in one run.
  StatusOr<ByteSpan> InPlace(const CheckpointFile& file, NodeId node) {
    const Checkpoint& cp = file.checkpoint();
    OPTSTATE_ASSIGN_OR_RETURN(std::optional<ByteSpan> span,
                              TensorBytesInPlace(file.bytes(), cp, cp.tensors[cp.graph.at(node).tensor]));
    if (!span) return UnsupportedError(file.path() + ": a ZeRO partition that is not contiguous");
    return *span;
  }

  StatusOr<std::vector<RecordPiece>> Pieces(size_t storage) {
    if (storage >= plans_.size()) return InternalError("ZeRO consolidation: storage without a plan");
    StoragePlan& plan = plans_[storage];
    std::vector<RecordPiece> pieces;
    if (plan.kind == StoragePlan::Kind::kBytes) {
      pieces.push_back({ByteSpan(plan.bytes.data(), plan.bytes.size()), std::nullopt, std::nullopt});
    } else if (plan.kind == StoragePlan::Kind::kModelTensor) {
      const Checkpoint& cp = plan.file->checkpoint();
      OPTSTATE_ASSIGN_OR_RETURN(held_, ReadTensorBytes(plan.file->bytes(), cp, cp.tensors[cp.graph.at(plan.node).tensor]));
      pieces.push_back({ByteSpan(held_.data(), held_.size()), std::nullopt, std::nullopt});
    } else {
      const ZeroParam& p = z_.params[plan.param];
      for (const ZeroFragment& f : p.fragments) {
        const CheckpointFile* file;
        NodeId node;
        if (p.group < 0) {
          const FrozenTensorRef frozen = FindFrozenTensor(z_, p.name, f.rank);
          file = frozen.file;
          node = frozen.node;
        } else {
          file = z_.ranks[f.rank].optim.get();
          node = plan.field.empty() ? z_.ranks[f.rank].fp32_partitions[p.group]
                                    : ZeroStateTensor(z_, f.rank, p.group, plan.field);
        }
        if (file == nullptr || node == kNoNode) {
          return CorruptError(z_.dir + ": rank " + std::to_string(f.rank) + " holds no " +
                                         (plan.field.empty() ? "fp32 weights" : plan.field) + " for " + p.name);
        }
        OPTSTATE_ASSIGN_OR_RETURN(ByteSpan whole, InPlace(*file, node));
        const size_t element = GetDTypeInfo(file->checkpoint().tensors[file->checkpoint().graph.at(node).tensor].dtype).element_size;
        if ((f.offset + f.numel) * element > whole.size()) {
          return CorruptError(file->path() + ": " + p.name + "'s fragment reaches past its partition");
        }
        ByteSpan part = whole.subspan(f.offset * element, f.numel * element);
        pieces.push_back({part, std::nullopt, file->FileRangeOf(part)});
        ++report_.pieces;
      }
    }
    for (const RecordPiece& piece : pieces) done_ += piece.data.size();
    if (o_.progress) o_.progress(done_, share_ ? *share_ : report_.tensor_bytes);
    return pieces;
  }

  const ZeroCheckpoint& z_;
  const ZeroConsolidateOptions& o_;
  Checkpoint cp_;
  GraphBuilder b_;
  std::vector<StoragePlan> plans_;  // by storage index
  std::vector<std::byte> held_;     // a buffer copied out of a model file
  uint64_t done_ = 0;
  std::optional<uint64_t> share_;  // this process's bytes when several write the file
  ZeroConsolidateReport report_;
};

}  // namespace

StatusOr<ZeroConsolidateReport> ConsolidateZero(const ZeroCheckpoint& zero, const std::string& output,
                                                const ZeroConsolidateOptions& options) {
  if (!zero.ok()) {
    const ZeroLayoutProblem& p = zero.problems.front();
    return CorruptError(p.where + ": " + p.message + (zero.problems.size() > 1 ? " (and " +
                        std::to_string(zero.problems.size() - 1) + " more problems)" : "") +
                        ": this ZeRO checkpoint cannot be put together (optstate validate " + zero.dir +
                        " lists every problem); nothing was written");
  }
  Consolidator c(zero, options);
  OPTSTATE_RETURN_IF_ERROR(c.Build());
  return c.Write(output);
}

StatusOr<ConsolidatedZero> ConsolidateZeroToScratch(const ZeroCheckpoint& zero, const std::string& scratch_parent,
                                                    const ZeroConsolidateOptions& options) {
  ConsolidatedZero out;
  OPTSTATE_ASSIGN_OR_RETURN(out.file, ScratchFile::Create(scratch_parent + "/optstate-consolidated", "consolidated.pt"));
  ZeroConsolidateOptions o = options;
  o.write.durability = Durability::kUnsynced;  // scratch, removed when done
  OPTSTATE_ASSIGN_OR_RETURN(out.report, ConsolidateZero(zero, out.file.path, o));
  return out;
}

}  // namespace optstate
