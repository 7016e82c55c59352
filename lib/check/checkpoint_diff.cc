#include "optstate/checkpoint_diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "io/staging_directory.h"
#include "optstate/dcp.h"
#include "optstate/unshard.h"
#include "pickle/graph_walk.h"

namespace optstate {
namespace {

struct Side {
  const MatchedState* m = nullptr;
  std::map<std::string, size_t> index;  // parameter name -> position
};

Side Index(const MatchedState& m) {
  Side s;
  s.m = &m;
  for (size_t p = 0; p < m.params.size(); ++p) s.index.emplace(m.params[p].name, p);
  return s;
}

// The step of a parameter's own state entry; nullopt for merged or missing state.
std::optional<double> StepOf(const MatchedState& m, size_t p, bool* has_state) {
  const ParamMatch& pm = m.match.params[p];
  *has_state = !pm.keys.empty();
  if (pm.keys.empty() || pm.collided) return std::nullopt;
  const ObjectGraph& g = m.file->checkpoint().graph;
  NodeId value = m.state.keys[pm.keys.front()].value;
  if (g.at(value).kind != NodeKind::kDict) return std::nullopt;
  NodeId step = DictLookup(g, value, "step");
  return step == kNoNode ? std::nullopt : NumberValue(m.file->checkpoint(), m.file->bytes(), step);
}

// The parameter's values in the model state_dict the parameters came from.
StatusOr<std::vector<float>> ValuesOf(const MatchedState& m, const std::string& name) {
  const CheckpointFile* model = m.model();
  if (model == nullptr) return UnsupportedError("the parameters came from a manifest, which holds no values");
  const Checkpoint& cp = model->checkpoint();
  NodeId v = DictLookup(cp.graph, m.model_dict, name);
  if (v == kNoNode || cp.graph.at(v).kind != NodeKind::kTensor) return NotFoundError("no tensor named " + name);
  return ReadTensorAsFloat(model->bytes(), cp, cp.tensors[cp.graph.at(v).tensor]);
}

void CompareValues(const MatchedState& a, const MatchedState& b, ParamDiff& d) {
  StatusOr<std::vector<float>> va = ValuesOf(a, d.name);
  StatusOr<std::vector<float>> vb = ValuesOf(b, d.name);
  if (!va.ok() || !vb.ok()) {
    d.note = std::string(!va.ok() ? va.status().message() : vb.status().message());
    return;
  }
  if (va->size() != vb->size()) {
    d.note = "A holds " + std::to_string(va->size()) + " values, B " + std::to_string(vb->size());
    return;
  }
  double diff2 = 0, norm2 = 0, max_abs = 0;
  bool identical = true;
  for (size_t i = 0; i < va->size(); ++i) {
    float x = (*va)[i], y = (*vb)[i];
    // Bit patterns, not ==: NaN == NaN is false and -0 == +0 is true.
    identical &= std::memcmp(&x, &y, sizeof x) == 0;
    double delta = static_cast<double>(y) - x;
    diff2 += delta * delta;
    norm2 += static_cast<double>(x) * x;
    max_abs = std::max(max_abs, std::fabs(delta));
  }
  d.max_abs_change = identical ? 0.0 : max_abs;
  d.relative_change = identical ? 0.0 : norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
}

std::string GroupValue(const ObjectGraph& g, NodeId group, const std::string& key) {
  NodeId v = DictLookup(g, group, key);
  return v == kNoNode ? "(absent)" : ValueText(g, v);
}

std::vector<NodeId> Groups(const MatchedState& m) {
  const ObjectGraph& g = m.file->checkpoint().graph;
  NodeId groups = DictLookup(g, m.state.node, "param_groups");
  return groups == kNoNode ? std::vector<NodeId>{} : g.at(groups).items.ToVector();
}

void CompareGroups(const MatchedState& a, const MatchedState& b, DiffReport& r) {
  const ObjectGraph& ga = a.file->checkpoint().graph;
  const ObjectGraph& gb = b.file->checkpoint().graph;
  std::vector<NodeId> xa = Groups(a), xb = Groups(b);
  r.groups_a = xa.size();
  r.groups_b = xb.size();
  for (size_t i = 0; i < xa.size() && i < xb.size(); ++i) {
    std::vector<std::string> keys;
    for (const auto* side : {&ga, &gb}) {
      NodeId group = side == &ga ? xa[i] : xb[i];
      for (auto [k, v] : side->at(group).entries) {
        if (side->at(k).kind != NodeKind::kStr || side->at(k).text == "params") continue;
        if (std::find(keys.begin(), keys.end(), side->at(k).text) == keys.end()) keys.push_back(side->at(k).text);
      }
    }
    for (const std::string& key : keys) {
      std::string va = GroupValue(ga, xa[i], key), vb = GroupValue(gb, xb[i], key);
      if (va != vb) r.hyper.push_back({i, key, va, vb});
    }
  }
}

}  // namespace

StatusOr<DiffReport> DiffCheckpoints(const std::string& a, const std::string& b, const DiffOptions& o) {
  MatchOptions match;
  OPTSTATE_ASSIGN_OR_RETURN(MatchedState ma, OpenAndMatch(a, o.state_key, o.a_params, o.read, match));
  OPTSTATE_ASSIGN_OR_RETURN(MatchedState mb, OpenAndMatch(b, o.state_key, o.b_params, o.read, match));
  DiffReport r;
  r.a = a;
  r.b = b;
  r.a_params_from = ma.params_from;
  r.b_params_from = mb.params_from;
  Side sa = Index(ma), sb = Index(mb);
  auto add = [&](const std::string& name) {
    ParamDiff d;
    d.name = name;
    auto ia = sa.index.find(name), ib = sb.index.find(name);
    d.in_a = ia != sa.index.end();
    d.in_b = ib != sb.index.end();
    d.shape = d.in_a ? ma.params[ia->second].shape : mb.params[ib->second].shape;
    if (d.in_a) d.step_a = StepOf(ma, ia->second, &d.state_a);
    if (d.in_b) d.step_b = StepOf(mb, ib->second, &d.state_b);
    if (d.state_a && !d.state_b) r.state_vanished.push_back(name);
    if (d.state_b && !d.state_a) r.state_appeared.push_back(name);
    if (!d.in_a || !d.in_b) {
      d.note = std::string("a parameter of ") + (d.in_a ? "A" : "B") + " only";
    } else {
      CompareValues(ma, mb, d);
    }
    bool stepped = d.step_a && d.step_b && *d.step_b > *d.step_a;
    if (!d.max_abs_change) {
      ++r.not_compared;
    } else if (*d.max_abs_change == 0) {
      ++r.unmoved;
      d.frozen = stepped;
      r.frozen += d.frozen;
    } else {
      ++r.moved;
    }
    r.params.push_back(std::move(d));
  };
  for (const ParamInfo& p : ma.params) add(p.name);
  for (const ParamInfo& p : mb.params) {
    if (!sa.index.count(p.name)) add(p.name);
  }
  CompareGroups(ma, mb, r);
  return r;
}

namespace {

// The one torch.save file `paths` amount to: itself, its DCP directory
// consolidated, or its rank files unsharded, into `scratch/name`.
StatusOr<std::string> AsOneFile(const std::vector<std::string>& paths, const std::string& scratch,
                                const std::string& name, const ReadOptions& read) {
  if (paths.empty()) return std::string();
  std::string out = scratch + "/" + name;
  std::error_code ec;
  if (paths.size() == 1 && !std::filesystem::is_directory(paths[0], ec)) return paths[0];
  if (paths.size() == 1) {
    OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<DcpCheckpoint> dcp, OpenDcpCheckpoint(paths[0]));
    ConsolidateOptions co;
    co.keys = ConsolidateKeys::kFqn;
    co.read = read;
    co.write.durability = Durability::kUnsynced;  // scratch, removed when done
    OPTSTATE_RETURN_IF_ERROR(ConsolidateDcp(*dcp, out, co).status());
    return out;
  }
  UnshardOptions uo;
  uo.read = read;
  uo.write.durability = Durability::kUnsynced;
  OPTSTATE_RETURN_IF_ERROR(UnshardRankFiles(paths, out, uo).status());
  return out;
}

std::string Label(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return paths[0];
  return "rank set of " + std::to_string(paths.size()) + " files (" + paths.front() + " ... " + paths.back() + ")";
}

}  // namespace

StatusOr<DiffReport> DiffCheckpointSets(const DiffSide& a, const DiffSide& b, const DiffOptions& options) {
  if (a.files.empty() || b.files.empty()) return InvalidArgumentError("diff needs two checkpoints");
  std::error_code ec;
  bool plain = a.files.size() == 1 && b.files.size() == 1 && a.models.size() <= 1 && b.models.size() <= 1 &&
               !std::filesystem::is_directory(a.files[0], ec) && !std::filesystem::is_directory(b.files[0], ec);
  DiffOptions o = options;
  if (a.models.size() == 1) o.a_params.model = a.models[0];
  if (b.models.size() == 1) o.b_params.model = b.models[0];
  if (plain) return DiffCheckpoints(a.files[0], b.files[0], o);
  std::string base = (std::filesystem::temp_directory_path(ec) / "optstate-diff").string();
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<StagingDirectory> scratch, StagingDirectory::Create(base, false));
  OPTSTATE_ASSIGN_OR_RETURN(std::string fa, AsOneFile(a.files, scratch->path(), "a.pt", options.read));
  OPTSTATE_ASSIGN_OR_RETURN(std::string fb, AsOneFile(b.files, scratch->path(), "b.pt", options.read));
  if (a.models.size() > 1) {
    OPTSTATE_ASSIGN_OR_RETURN(o.a_params.model, AsOneFile(a.models, scratch->path(), "a.model.pt", options.read));
  }
  if (b.models.size() > 1) {
    OPTSTATE_ASSIGN_OR_RETURN(o.b_params.model, AsOneFile(b.models, scratch->path(), "b.model.pt", options.read));
  }
  OPTSTATE_ASSIGN_OR_RETURN(DiffReport r, DiffCheckpoints(fa, fb, o));
  // Name what the user gave, not the scratch files.
  auto rename = [&](std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  };
  for (std::string* t : {&r.a, &r.a_params_from}) rename(*t, fa, Label(a.files));
  for (std::string* t : {&r.b, &r.b_params_from}) rename(*t, fb, Label(b.files));
  if (a.models.size() > 1) rename(r.a_params_from, o.a_params.model, Label(a.models));
  if (b.models.size() > 1) rename(r.b_params_from, o.b_params.model, Label(b.models));
  return r;
}

}  // namespace optstate
