// Where each parameter lies in the ranks' flat partitions, and whether the
// files agree with it. The shapes in the model states decide the layout
// (DeepSpeed's zero_to_fp32 rebuilds weights from them alone); what the rank
// files record besides (partition sizes, param_slice_mappings, group_paddings,
// steps, hyperparameters) is checked against it, so a file from another run or
// a rank file cut short is a problem, never a silently wrong consolidation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "pickle/graph_walk.h"
#include "zero/zero_graph.h"

namespace optstate {
namespace {

std::string GroupText(size_t g) { return "group " + std::to_string(g); }

std::string ValueTextOfStep(double step) {
  if (std::isnan(step)) return "(none)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", step);
  return buf;
}

const TensorRef* TensorOf(const CheckpointFile& f, NodeId n) {
  const Checkpoint& cp = f.checkpoint();
  if (n == kNoNode || cp.graph.at(n).kind != NodeKind::kTensor) return nullptr;
  return &cp.tensors[cp.graph.at(n).tensor];
}

// A step saved as a 0-d tensor (torch 2.x), an int or a float; NaN if none.
double StepOf(const CheckpointFile& f, NodeId entry) {
  const ObjectGraph& g = f.checkpoint().graph;
  NodeId s = DictLookup(g, entry, "step");
  if (s == kNoNode) return std::nan("");
  if (auto i = IntOf(g, s)) return static_cast<double>(*i);
  if (g.at(s).kind == NodeKind::kFloat) return g.at(s).float_value;
  if (const TensorRef* t = TensorOf(f, s); t && t->numel() == 1) {
    auto v = ReadTensorAsFloat(f.bytes(), f.checkpoint(), *t);
    if (v.ok()) return (*v)[0];
  }
  return std::nan("");
}

// Reads one rank's optimizer file: its groups' fp32 partitions, state and steps.
void ReadRank(ZeroCheckpoint& z, uint32_t r) {
  ZeroRank& rank = z.ranks[r];
  const ObjectGraph& g = rank.optim->checkpoint().graph;
  NodeId osd = DictLookup(g, g.root, "optimizer_state_dict");
  const char* inner_key = z.stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
  const char* fp32_key = z.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  NodeId inner = osd == kNoNode ? kNoNode : DictLookup(g, osd, inner_key);
  NodeId fp32 = osd == kNoNode ? kNoNode : DictLookup(g, osd, fp32_key);
  if (!IsDictNode(g, inner) || !IsSequence(g, fp32)) {
    z.problems.push_back({"file", rank.optim_path,
                          std::string("no optimizer_state_dict.") + inner_key + " dict and " + fp32_key +
                              " list: not the ZeRO-" + std::to_string(z.stage) + " layout this version reads"});
    rank.optim.reset();
    return;
  }
  rank.optimizer_state_dict = inner;
  NodeId paddings = DictLookup(g, osd, "group_paddings");
  for (size_t i = 0; z.stage != 3 && i < g.at(fp32).items.size(); ++i) {
    auto v = IsSequence(g, paddings) && i < g.at(paddings).items.size() ? IntOf(g, g.at(paddings).items[i]) : std::nullopt;
    rank.saved_padding.push_back(v && *v >= 0 ? static_cast<uint64_t>(*v) : 0);
  }
  for (NodeId t : g.at(fp32).items) rank.fp32_partitions.push_back(TensorOf(*rank.optim, t) ? t : kNoNode);
  NodeId state = DictLookup(g, inner, "state");
  for (size_t grp = 0; grp < rank.fp32_partitions.size(); ++grp) {
    double step = std::nan("");
    if (IsDictNode(g, state)) {
      for (const auto& [k, v] : g.at(state).entries) {
        if (IntOf(g, k) == static_cast<int64_t>(grp)) step = StepOf(*rank.optim, v);
      }
    }
    rank.steps.push_back(step);
  }
}

// The group's hyperparameters as text, "params" left out: ranks must agree.
std::map<std::string, std::string> Hyperparameters(const ObjectGraph& g, NodeId inner, size_t group) {
  std::map<std::string, std::string> out;
  NodeId groups = DictLookup(g, inner, "param_groups");
  if (!IsSequence(g, groups) || group >= g.at(groups).items.size()) return out;
  NodeId pg = g.at(groups).items[group];
  if (!IsDictNode(g, pg)) return out;
  for (const auto& [k, v] : g.at(pg).entries) {
    if (g.at(k).kind == NodeKind::kStr && g.at(k).text != "params") out[g.at(k).text] = ValueText(g, v, 200);
  }
  return out;
}

void PlaceStage12(ZeroCheckpoint& z, size_t grp, uint64_t partition) {
  ZeroGroup& group = z.groups[grp];
  const uint64_t total = partition * z.world_size;
  uint64_t offset = 0;
  for (size_t pi : group.params) {
    ZeroParam& p = z.params[pi];
    for (uint32_t r = 0; r < z.world_size; ++r) {
      uint64_t lo = std::max<uint64_t>(offset, r * partition), hi = std::min<uint64_t>(offset + p.numel, (r + 1) * partition);
      if (lo < hi) p.fragments.push_back({r, lo - r * partition, lo - offset, hi - lo});
    }
    offset += p.numel;
  }
  if (offset > total) {
    z.problems.push_back({"tiling", GroupText(grp),
                          "its parameters hold " + std::to_string(offset) + " elements, its " +
                              std::to_string(z.world_size) + " partitions of " + std::to_string(partition) +
                              " only " + std::to_string(total) + ": these rank files are not this model's"});
  }
  for (uint32_t r = 0; r < z.world_size; ++r) {
    uint64_t used = 0;
    for (size_t pi : group.params) {
      for (const ZeroFragment& f : z.params[pi].fragments) used += f.rank == r ? f.numel : 0;
    }
    group.padding[r] = partition - std::min(partition, used);
  }
}

void PlaceStage3(ZeroCheckpoint& z, size_t grp, uint64_t partition) {
  ZeroGroup& group = z.groups[grp];
  uint64_t offset = 0;
  for (size_t pi : group.params) {
    ZeroParam& p = z.params[pi];
    const uint64_t per_rank = (p.numel + z.world_size - 1) / z.world_size;
    for (uint32_t r = 0; r < z.world_size; ++r) {
      uint64_t start = std::min<uint64_t>(p.numel, r * per_rank), n = std::min<uint64_t>(p.numel - start, per_rank);
      if (n > 0) p.fragments.push_back({r, offset, start, n});
      group.padding[r] += per_rank - n;
    }
    offset += per_rank;
  }
  if (offset != partition) {
    z.problems.push_back({"tiling", GroupText(grp),
                          "its parameters cut " + std::to_string(z.world_size) + " ways need " + std::to_string(offset) +
                              " elements per rank, the rank files hold " + std::to_string(partition) +
                              ": these rank files are not this model's"});
  }
}

// Stages 1, 2: DeepSpeed records each rank's fragments (param_slice_mappings)
// and the last rank's padding (group_paddings); both must be what the shapes give.
void CheckRecordedSlices(ZeroCheckpoint& z, uint32_t r) {
  const ZeroRank& rank = z.ranks[r];
  const ObjectGraph& g = rank.optim->checkpoint().graph;
  NodeId osd = DictLookup(g, g.root, "optimizer_state_dict");
  NodeId mappings = DictLookup(g, osd, "param_slice_mappings");
  NodeId paddings = DictLookup(g, osd, "group_paddings");
  for (size_t grp = 0; grp < z.groups.size(); ++grp) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> expected;  // name -> (start, numel)
    for (size_t pi : z.groups[grp].params) {
      for (const ZeroFragment& f : z.params[pi].fragments) {
        if (f.rank == r) expected[z.params[pi].name] = {f.offset, f.numel};
      }
    }
    if (IsSequence(g, mappings) && grp < g.at(mappings).items.size() && IsDictNode(g, g.at(mappings).items[grp])) {
      std::map<std::string, std::pair<uint64_t, uint64_t>> recorded;
      for (const auto& [k, v] : g.at(g.at(mappings).items[grp]).entries) {
        NodeId st = g.at(v).kind == NodeKind::kObject ? g.at(v).state() : v;
        auto start = IntOf(g, DictLookup(g, st, "start")), numel = IntOf(g, DictLookup(g, st, "numel"));
        if (g.at(k).kind == NodeKind::kStr && start && numel) recorded[g.at(k).text] = {*start, *numel};
      }
      if (recorded != expected) {
        std::string diff;
        for (const auto& [name, se] : expected) {
          auto it = recorded.find(name);
          if (it == recorded.end()) {
            diff += "; " + name + " not recorded";
          } else if (it->second != se) {
            diff += "; " + name + " recorded at " + std::to_string(it->second.first) + "+" +
                    std::to_string(it->second.second) + ", the shapes place it at " + std::to_string(se.first) + "+" +
                    std::to_string(se.second);
          }
        }
        for (const auto& [name, se] : recorded) {
          if (!expected.count(name)) diff += "; " + name + " recorded, but the shapes place none of it here";
        }
        z.problems.push_back({"tiling", rank.optim_path + ": " + GroupText(grp),
                              "param_slice_mappings disagree with the parameter shapes" + diff});
      }
    }
    if (IsSequence(g, paddings) && rank.saved_padding[grp] != z.groups[grp].padding[r]) {
      z.problems.push_back({"partition-size", rank.optim_path + ": " + GroupText(grp),
                            "group_paddings records " + std::to_string(rank.saved_padding[grp]) +
                                " padding elements on this rank, the shapes leave " +
                                std::to_string(z.groups[grp].padding[r])});
    }
  }
}

// Frozen parameters: stages 1, 2 keep them whole in the model states;
// stage 3 cuts them like trainable ones, one piece per rank's model file.
void PlaceFrozen(ZeroCheckpoint& z) {
  for (ZeroParam& p : z.params) {
    if (p.group >= 0) continue;
    const uint64_t per_rank = z.stage == 3 ? (p.numel + z.world_size - 1) / z.world_size : p.numel;
    for (uint32_t r = 0; r < (z.stage == 3 ? z.world_size : 1); ++r) {
      const auto [file, t] = FindFrozenTensor(z, p.name, r);
      if (file == nullptr) continue;
      const TensorRef* ref = TensorOf(*file, t);
      if (ref == nullptr || ref->numel() != per_rank) {
        z.problems.push_back({"partition-size", file->path() + ": frozen parameter " + p.name,
                              ref == nullptr ? "no tensor for it" : "holds " + std::to_string(ref->numel()) +
                                  " elements, its shape needs " + std::to_string(per_rank) + " here"});
        continue;
      }
      uint64_t start = std::min<uint64_t>(p.numel, r * per_rank), n = std::min<uint64_t>(p.numel - start, per_rank);
      if (n > 0) p.fragments.push_back({r, 0, start, n});
    }
  }
}

}  // namespace

void PlaceZeroFragments(ZeroCheckpoint& z) {
  for (ZeroGroup& group : z.groups) {
    group.partition_numel.assign(z.world_size, 0);
    group.padding.assign(z.world_size, 0);
  }
  std::optional<uint32_t> reference;  // the first rank whose file reads and has every group
  for (uint32_t r = 0; r < z.world_size; ++r) {
    ZeroRank& rank = z.ranks[r];
    if (!rank.optim) continue;
    ReadRank(z, r);
    if (rank.optim && rank.fp32_partitions.size() != z.groups.size()) {
      z.problems.push_back({"groups-differ", rank.optim_path,
                            std::to_string(rank.fp32_partitions.size()) + " flat fp32 groups, the model states list " +
                                std::to_string(z.groups.size()) + " param groups"});
      rank.optim.reset();
    }
    if (rank.optim && !reference) reference = r;
  }
  if (!reference) {
    PlaceFrozen(z);
    return;
  }
  for (uint32_t r = 0; r < z.world_size; ++r) {
    ZeroRank& rank = z.ranks[r];
    if (!rank.optim) continue;
    for (size_t grp = 0; grp < z.groups.size(); ++grp) {
      const TensorRef* t = TensorOf(*rank.optim, rank.fp32_partitions[grp]);
      if (t == nullptr || t->dtype != DType::kFloat32) {
        z.problems.push_back({"file", rank.optim_path + ": " + GroupText(grp), "its fp32 partition is no float32 tensor"});
        continue;
      }
      // Stages 1, 2 save the fp32 partition without its padding, the state with it;
      // BF16_Optimizer saves both with it.
      const uint64_t saved = t->numel(), padding = z.stage == 3 || z.bf16_optimizer ? 0 : rank.saved_padding[grp];
      z.groups[grp].partition_numel[r] = saved + padding;
      const ObjectGraph& g = rank.optim->checkpoint().graph;
      NodeId state = DictLookup(g, rank.optimizer_state_dict, "state");
      for (const auto& [k, v] : IsDictNode(g, state) ? g.at(state).entries : decltype(g.at(state).entries){}) {
        if (IntOf(g, k) != static_cast<int64_t>(grp) || !IsDictNode(g, v)) continue;
        for (const auto& [field, value] : g.at(v).entries) {
          const TensorRef* s = TensorOf(*rank.optim, value);
          if (g.at(field).kind != NodeKind::kStr || s == nullptr || s->numel() <= 1) continue;
          if (r == *reference) z.groups[grp].state_fields.push_back(g.at(field).text);
          if (s->numel() != saved + padding && s->numel() != saved) {
            z.problems.push_back({"partition-size", rank.optim_path + ": " + GroupText(grp),
                                  g.at(field).text + " holds " + std::to_string(s->numel()) +
                                      " elements, the fp32 partition " + std::to_string(saved) +
                                      (padding ? " (" + std::to_string(saved + padding) + " with its padding)" : "")});
          }
        }
      }
    }
  }
  const ZeroRank& ref = z.ranks[*reference];
  const ObjectGraph& rg = ref.optim->checkpoint().graph;
  for (size_t grp = 0; grp < z.groups.size(); ++grp) {
    const uint64_t partition = z.groups[grp].partition_numel[*reference];
    for (uint32_t r = 0; r < z.world_size; ++r) {
      const ZeroRank& rank = z.ranks[r];
      if (!rank.optim || r == *reference) continue;
      // Stage 3's partition sizes follow from the shapes alone: a differing one is a tiling fault.
      if (z.groups[grp].partition_numel[r] != partition) {
        z.problems.push_back({z.stage == 3 ? "tiling" : "partition-size", rank.optim_path + ": " + GroupText(grp),
                              "a partition of " + std::to_string(z.groups[grp].partition_numel[r]) + " elements, rank " +
                                  std::to_string(*reference) + "'s has " + std::to_string(partition)});
      }
      double a = ref.steps[grp], b = rank.steps[grp];
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
        z.problems.push_back({"steps-differ", rank.optim_path + ": " + GroupText(grp),
                              "step " + ValueTextOfStep(b) + ", rank " + std::to_string(*reference) + " is at step " +
                                  ValueTextOfStep(a) + ": the rank files are from different saves"});
      }
      const ObjectGraph& g = rank.optim->checkpoint().graph;
      auto mine = Hyperparameters(g, rank.optimizer_state_dict, grp), theirs = Hyperparameters(rg, ref.optimizer_state_dict, grp);
      if (mine != theirs) {
        std::string diff;
        for (const auto& [k, v] : theirs) {
          auto it = mine.find(k);
          if (it == mine.end() || it->second != v) diff += " " + k + "=" + (it == mine.end() ? "(none)" : it->second) + " (rank " + std::to_string(*reference) + ": " + v + ")";
        }
        z.problems.push_back({"groups-differ", rank.optim_path + ": " + GroupText(grp),
                              "hyperparameters differ from rank " + std::to_string(*reference) + "'s:" + diff});
      }
    }
    if (z.stage == 3) {
      PlaceStage3(z, grp, partition);
    } else {
      PlaceStage12(z, grp, partition);
    }
  }
  if (z.stage != 3) {
    for (uint32_t r = 0; r < z.world_size; ++r) {
      if (z.ranks[r].optim) CheckRecordedSlices(z, r);
    }
  }
  PlaceFrozen(z);
}

}  // namespace optstate
