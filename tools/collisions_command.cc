// `optstate collisions FILE [--manifest M | --model F]`: which optimizer state belongs to which
// parameter, which parameters had their state merged, and what is orphaned.
#include "commands.h"

#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/collisions.h"
#include "optstate/inspect_report.h"
#include "optstate/params.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "collisions";

struct CollisionsOptions : StateInputs {
  bool json = false;
};

void DeclareFlags(CLI::App& cmd, CollisionsOptions& o) {
  AddCheckpointPaths(cmd, "path", o.paths,
                     "torch.save checkpoint holding an optimizer state dict; several: the per-rank files of\n"
                     "one sharded save (in rank order, or named rank<N>)");
  AddParamSourceFlags(cmd, o.params, o.models);
  AddStateKeyFlag(cmd, o.state_key, "Where the optimizer state dict is, e.g. optimizer (default: find it)");
  AddJsonFlag(cmd, o.json, "collisions", "Write JSON");
  AddReadLimitFlags(cmd, o.read);
}

std::string Names(const std::vector<ParamInfo>& params, const std::vector<size_t>& ids) {
  std::string out;
  for (size_t p : ids) out += (out.empty() ? "" : ", ") + params[p].name;
  return out;
}

void WriteText(const std::string& file, const MatchedState& m, std::ostream& out) {
  const OptimizerState& st = m.state;
  const std::vector<ParamInfo>& params = m.params;
  const MatchReport& r = m.match;
  out << file << ": optimizer state at " << (st.path.empty() ? "(root)" : st.path) << "\n";
  out << "  key scheme   " << KeyKindName(st.scheme) << ": " << KeyKindOrigin(st.scheme)
      << (st.mixed ? " (mixed with other kinds)" : "") << "\n";
  out << "  keys         " << st.keys.size() << "\n";
  WriteParamSourceText(m, out);
  out << "\n";
  size_t width = 10;
  for (const ParamInfo& p : params) width = std::max(width, p.name.size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "parameter" << "  " << std::setw(14) << "shape"
      << "state\n";
  for (size_t p = 0; p < params.size(); ++p) {
    const ParamMatch& pm = r.params[p];
    out << "  " << std::setw(static_cast<int>(width)) << params[p].name << "  " << std::setw(14)
        << ShapeText(params[p].shape);
    if (pm.collided) {
      out << "MERGED with others (see collisions)";
    } else if (pm.keys.empty()) {
      out << "none";
    } else {
      out << pm.keys.size() << (pm.keys.size() == 1 ? " entry" : " entries (views)") << ", "
          << ConfidenceName(pm.confidence);
      if (pm.keys.size() > 1) {
        std::string shapes;
        for (size_t k : pm.keys) shapes += (shapes.empty() ? "" : " + ") + ShapeText(st.keys[k].shape);
        if (st.keys[pm.keys.front()].kind == KeyKind::kPtrShape) out << ": " << shapes;
      }
    }
    out << "\n";
  }
  out << std::right;
  out << "\ncollisions: ";
  if (r.collisions.empty()) {
    out << "none\n";
  } else {
    size_t merged = 0;
    for (const CollisionGroup& c : r.collisions) merged += c.params.size();
    out << r.collisions.size() << (r.collisions.size() == 1 ? " group, " : " groups, ") << merged
        << " parameters, " << HumanBytes(r.unattributable_bytes) << " of state that cannot be attributed\n";
    for (const CollisionGroup& c : r.collisions) {
      out << "  " << Names(params, c.params) << "\n    " << c.reason << "\n";
    }
  }
  out << "orphans: " << (r.orphans.empty() ? "none" : std::to_string(r.orphans.size())) << "\n";
  for (size_t k : r.orphans) out << "  " << st.keys[k].text << ": " << r.keys[k].reason << "\n";
  out << "ambiguous: " << (r.ambiguous.empty() ? "none" : std::to_string(r.ambiguous.size())) << "\n";
  for (size_t k : r.ambiguous) out << "  " << st.keys[k].text << ": " << r.keys[k].reason << "\n";
  out << "parameters without state: " << (r.without_state.empty() ? "none" : Names(params, r.without_state))
      << "\n";
}

nlohmann::ordered_json ToJson(const std::string& file, const MatchedState& m) {
  using J = nlohmann::ordered_json;
  const OptimizerState& st = m.state;
  const std::vector<ParamInfo>& params = m.params;
  const MatchReport& r = m.match;
  J doc = {{"file", file}, {"params_source", ParamSourceJson(m)}, {"state_path", st.path},
           {"scheme", KeyKindName(st.scheme)}, {"mixed", st.mixed},
           {"key_count", st.keys.size()}, {"param_count", params.size()}};
  doc["keys"] = J::array();
  for (size_t i = 0; i < st.keys.size(); ++i) {
    const KeyMatch& k = r.keys[i];
    J j = {{"key", st.keys[i].text}, {"kind", KeyKindName(st.keys[i].kind)}, {"fate", KeyFateName(k.fate)},
           {"params", J::array()}, {"view", k.view}, {"confidence", ConfidenceName(k.confidence)},
           {"state_bytes", st.keys[i].state_bytes}};
    for (size_t p : k.params) j["params"].push_back(params[p].name);
    if (k.candidates >= 0) j["candidates"] = k.candidates;
    if (!k.reason.empty()) j["reason"] = k.reason;
    doc["keys"].push_back(std::move(j));
  }
  doc["collisions"] = J::array();
  for (const CollisionGroup& c : r.collisions) {
    J j = {{"params", J::array()}, {"keys", c.keys}, {"bytes", c.bytes}, {"reason", c.reason}};
    for (size_t p : c.params) j["params"].push_back(params[p].name);
    if (!c.shape.empty()) j["shape"] = c.shape;
    doc["collisions"].push_back(std::move(j));
  }
  doc["candidate_groups"] = J::array();
  for (const CandidateGroup& g : r.candidate_groups) {
    J j = {{"shape", g.shape}, {"params", J::array()}, {"keys", g.keys}};
    for (size_t p : g.params) j["params"].push_back(params[p].name);
    doc["candidate_groups"].push_back(std::move(j));
  }
  doc["orphans"] = r.orphans;
  doc["ambiguous"] = r.ambiguous;
  doc["without_state"] = J::array();
  for (size_t p : r.without_state) doc["without_state"].push_back(params[p].name);
  doc["unattributable_bytes"] = r.unattributable_bytes;
  return doc;
}

std::string NumberText(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream s;
  s << v;
  return s.str();
}

// No parameter list: what the optimizer file shows by itself.
int RunAlone(const CollisionsOptions& o, const Status& no_params, CommandOutput& output) {
  using J = nlohmann::ordered_json;
  auto file = OpenCheckpoint(o.path(), o.read);
  if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
  auto st = LocateOptimizerState((*file)->checkpoint(), o.state_key);
  if (!st.ok()) return ReportError(output, kName, st.status().WithContext(o.path()), o.json);
  CollisionEvidence e = FindCollisionEvidence(**file, *st);
  if (!e.merged) {
    return ReportError(output, kName,
                       Status(no_params.code(), std::string(no_params.message()) + "; the optimizer file alone "
                                                    "shows no merged state (" + e.reason + ")"),
                       o.json);
  }
  if (o.json) {
    J keys = J::array();
    for (const EntryEvidence& k : e.keys) {
      J j = {{"key", st->keys[k.key].text}};
      if (!k.shape.empty()) j["shape"] = k.shape;
      if (k.step) j["step"] = *k.step;
      if (k.multiplicity) j["multiplicity"] = *k.multiplicity;
      keys.push_back(std::move(j));
    }
    J ev = {{"merged", e.merged}, {"reason", e.reason}};
    if (e.pointer) ev["pointer"] = *e.pointer;
    if (e.reference_step) ev["reference_step"] = *e.reference_step;
    ev["keys"] = std::move(keys);
    WriteJson(output, J{{"file", o.path()}, {"params_source", nullptr}, {"state_path", st->path},
                        {"scheme", KeyKindName(st->scheme)}, {"key_count", st->keys.size()},
                        {"param_count", st->param_count}, {"evidence", std::move(ev)}});
    return kExitFindings;
  }
  std::ostream& out = output.out;
  out << o.path() << ": optimizer state at " << (st->path.empty() ? "(root)" : st->path) << "\n";
  out << "  key scheme   " << KeyKindName(st->scheme) << ": " << KeyKindOrigin(st->scheme) << "\n";
  out << "  keys         " << st->keys.size() << "\n";
  out << "  parameters   " << st->param_count << " in param_groups; no model or manifest, so only the file "
      << "itself is evidence\n\n";
  out << "collisions: state was merged across parameters\n  " << e.reason << "\n";
  out << "entries by shape" << (e.reference_step ? " (one parameter's step count: " +
                                                      NumberText(*e.reference_step) + ")" : "")
      << ":\n";
  for (const EntryEvidence& k : e.keys) {
    out << "  " << st->keys[k.key].text;
    if (k.step) out << "  step " << NumberText(*k.step);
    if (k.multiplicity) out << ": stepped " << *k.multiplicity << "x as often, so about " << *k.multiplicity
                            << " parameters share it";
    out << "\n";
  }
  out << "which parameters share an entry: pass --model (every rank's model file) or --manifest\n";
  return kExitFindings;
}

bool NoParamSourceGiven(const ParamSource& p) { return p.manifest.empty() && p.model.empty(); }

bool IsClean(const MatchReport& r) { return r.collisions.empty() && r.orphans.empty() && r.ambiguous.empty(); }

// Several files: one sharded save, matched on global shapes; every rank's
// match agrees (OpenAndMatchRankSet checks), so rank 0's is the report --
// unless the ranks hold different entries, when each rank's is reported.
// Exit 0 when every state entry belongs to exactly one parameter, 1 when there
// are collisions, orphans or ambiguous keys, 2 when the job cannot be done.
int RunRankSet(const CollisionsOptions& o, CommandOutput& output) {
  auto set = OpenAndMatchRankSet(o);
  if (!set.ok()) return ReportError(output, kName, set.status(), o.json);
  const size_t reported = set->ranks_differ ? set->ranks.size() : 1;
  bool clean = true;
  for (size_t r = 0; r < reported; ++r) clean &= IsClean(set->ranks[r].match);
  if (o.json) {
    nlohmann::ordered_json doc = ToJson(set->files[0], set->ranks[0]);
    doc["ranks"] = nlohmann::ordered_json::array();
    for (size_t r = 0; r < set->files.size(); ++r) {
      nlohmann::ordered_json j = {{"rank", r}, {"file", set->files[r]}};
      if (!set->models.empty()) j["model"] = set->models[r];
      if (set->ranks_differ) j["report"] = ToJson(set->files[r], set->ranks[r]);
      doc["ranks"].push_back(std::move(j));
    }
    doc["global_shapes"] = set->global_shapes;
    WriteJson(output, doc);
  } else {
    output.out << "sharded save of " << set->files.size() << " ranks; "
               << (set->ranks_differ ? "the ranks hold different entries, each rank's report follows\n"
                                     : "every rank's files agree\n");
    for (size_t r = 0; r < set->files.size(); ++r) {
      output.out << "  rank " << r << "  " << set->files[r]
                 << (set->models.empty() ? "" : "  model " + set->models[r]) << "\n";
    }
    output.out << "  global shapes: " << set->global_shapes << "\n";
    for (size_t r = 0; r < reported; ++r) {
      output.out << "\n";
      WriteText(set->files[r], set->ranks[r], output.out);
    }
  }
  return clean ? kExitOk : kExitFindings;
}

int RunCollisions(const CollisionsOptions& o, CommandOutput& output) {
  if (o.paths.size() > 1 || o.models.size() > 1) return RunRankSet(o, output);
  ParamSource source = o.params;
  source.state_shapes_when_none = true;  // index keys alone: each index is its own parameter
  auto m = OpenAndMatch(o.path(), o.state_key, source, o.read, o.match);
  // Nothing was asked for and nothing found: the file alone may still show a
  // collision. (A missing optimizer state is NotFound too; RunAlone reports it
  // the same way when it looks for the state itself.)
  if (!m.ok() && m.status().code() == StatusCode::kNotFound && NoParamSourceGiven(o.params) &&
      o.params.model_key.empty()) {
    return RunAlone(o, m.status(), output);
  }
  if (!m.ok()) return ReportError(output, kName, m.status(), o.json);
  const MatchReport& report = m->match;
  if (o.json) {
    WriteJson(output, ToJson(o.path(), *m));
  } else {
    WriteText(o.path(), *m, output.out);
  }
  return IsClean(report) ? kExitOk : kExitFindings;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Match optimizer state to parameters and report merged (collided) and orphaned state",
    "\nExit codes: 0 every state entry belongs to exactly one parameter; 1 collisions, orphans or\n"
    "ambiguous keys found; 2 could not do the job.\n"
    "\nWithout --model or --manifest (and no model inside the file), the optimizer file alone is\n"
    "evidence: fewer pointer-keyed entries than parameters, all at pointer 0 (FSDP) or one pointer,\n"
    "prove a collision (exit 1); step counters that ran a multiple faster show how many shared.\n"
    "\nExamples:\n"
    "  optstate collisions --manifest params.json heavyball.pt\n"
    "  optstate collisions --model model.pt heavyball_optim.pt\n"
    "  optstate collisions checkpoint.pt       # the parameters from its own 'model' entry\n"
    "  optstate collisions rank0.optim.pt      # no model at all: what the file alone shows\n"
    "  optstate collisions rank0.optim.pt rank1.optim.pt --model rank0.model.pt --model rank1.model.pt\n"
    "  optstate collisions --manifest params.json --state-key optimizer --json checkpoint.pt",
};

CommandRunner AddCollisionsCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunCollisions);
}

}  // namespace optstate::tools
