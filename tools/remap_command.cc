// `optstate remap FILE [--manifest M | --model F] -o OUT`: write a checkpoint whose optimizer
// state torch.optim maps to the right parameters.
#include "commands.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint_writer.h"
#include "optstate/collisions.h"
#include "optstate/inspect_report.h"
#include "optstate/params.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "remap";

struct RemapCommandOptions : StateInputs {
  std::string output;                // a file; a directory for several inputs
  std::string to = "index";          // index | fqn
  std::string on_collision = "fail";  // fail | reset | share | drop
  std::string report;                // conservation report (JSON) path
  bool json = false;
  bool zstd = false;
  bool no_sync = false;
};

void DeclareFlags(CLI::App& cmd, RemapCommandOptions& o) {
  AddCheckpointPaths(cmd, "input", o.paths,
                     "Checkpoint with the optimizer state; several: the per-rank files of one sharded save");
  AddOutputFileFlag(cmd, o.output,
                    "Output checkpoint (temporary file beside it, then renamed); with several inputs, a\n"
                    "directory that gets one file per rank, named as its input");
  AddParamSourceFlags(cmd, o.params, o.models);
  AddStateKeyFlag(cmd, o.state_key);
  cmd.add_option("--to", o.to, "Key the state by parameter index (torch.optim) or FQN (DCP)")
      ->check(CLI::IsMember({"index", "fqn"}))
      ->capture_default_str();
  cmd.add_option("--on-collision", o.on_collision,
                 "State merged across parameters: fail; drop it; share (a copy each); reset (fresh zero state)")
      ->check(CLI::IsMember({"fail", "reset", "share", "drop"}))
      ->capture_default_str();
  AddWriteFlags(cmd, o.no_sync, o.read.verify_crc);
  cmd.add_flag("--zstd", o.zstd, "Compress the output with zstd (name it .zst; optstate reads it directly)");
  cmd.add_option("--report", o.report, "Write the conservation report (every input entry's fate) as JSON");
  AddJsonFlag(cmd, o.json, "remap", "Write the report to stdout as JSON");
  AddReadLimitFlags(cmd, o.read);
}

nlohmann::ordered_json ReportJson(const RemapCommandOptions& o, const std::string& input, const std::string& output,
                                  const MatchedState& m, const RemapResult& r, const WriteReport& w) {
  using J = nlohmann::ordered_json;
  const OptimizerState& st = m.state;
  J doc = {{"input", input}, {"output", output}, {"params_source", ParamSourceJson(m)}, {"state_path", st.path},
           {"input_scheme", KeyKindName(st.scheme)}, {"to", o.to}, {"on_collision", o.on_collision},
           {"moved", r.moved}, {"shared", r.shared}, {"reset", r.reset}, {"dropped", r.dropped}};
  AppendWrittenFileJson(w, doc);
  doc["loadable_after_dtensor_import"] = w.loadable_after_dtensor_import;
  doc["entries"] = RemapEntriesJson(r.entries);
  return doc;
}

RemapOptions ToRemapOptions(const RemapCommandOptions& o) {
  RemapOptions ro;
  ro.to = o.to == "fqn" ? KeyTarget::kFqn : KeyTarget::kIndex;
  ro.on_collision = o.on_collision == "drop"    ? CollisionPolicy::kDrop
                    : o.on_collision == "share" ? CollisionPolicy::kShare
                    : o.on_collision == "reset" ? CollisionPolicy::kReset
                                                : CollisionPolicy::kFail;
  return ro;
}

void WriteText(const RemapCommandOptions& o, const std::string& out_path, const MatchedState& m,
               const RemapResult& remapped, const WriteReport& written, std::ostream& out) {
  const OptimizerState* state = &m.state;
  out << out_path << ": " << HumanBytes(written.bytes) << "; optimizer state at "
      << (state->path.empty() ? "(root)" : state->path) << " rekeyed from " << KeyKindName(state->scheme) << " to "
      << o.to << "\n";
  WriteParamSourceText(m, out);
  out << "  " << remapped.moved << " of " << state->keys.size() << " entries carried over, ";
  if (remapped.shared) out << remapped.shared << " shared (a copy each), ";
  if (remapped.reset) out << remapped.reset << " reset (their values are not carried over), ";
  out << remapped.dropped << " dropped\n";
  for (const RemapEntry& e : remapped.entries) {
    if (e.fate == "moved") continue;
    out << "  " << e.fate << " " << e.input_key;
    if (!e.output_keys.empty()) {
      out << " -> " << (e.fate == "shared" ? "a copy each for " : "fresh zero state for ");
      for (size_t i = 0; i < e.params.size(); ++i) out << (i ? ", " : "") << e.params[i];
    }
    out << ": " << e.reason << "\n";
  }
  out << "  " << (o.zstd ? "after zstd -d, " : "") << "torch.load(weights_only=True) " << WeightsOnlyVerdict(written)
      << "\n";
}

// A file whose every state entry would be dropped is not "remapped": writing
// it and exiting 0 would hand training an optimizer with no state.
Status NothingCarriedOver(const std::string& where, const OptimizerState& st, const RemapResult& r) {
  if (st.keys.empty() || r.moved + r.shared + r.reset > 0) return Status();
  std::string why;
  for (const RemapEntry& e : r.entries) {
    if (!e.reason.empty()) {
      why = " (" + e.input_key + ": " + e.reason + ")";
      break;
    }
  }
  return InvalidArgumentError(where + ": all " + std::to_string(st.keys.size()) + " state entries would be dropped" +
                              why + "; nothing was written");
}

WriteOptions ToWriteOptions(const RemapCommandOptions& o) {
  WriteOptions wo;
  wo.zstd = o.zstd;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  return wo;
}

// Several inputs: one sharded save. Every rank is matched and remapped before
// anything is written, so a refusal leaves no output; each rank's file goes to
// OUTPUT/<its input's name>, its DTensor shards kept as they were.
// Exit 0 written; 1 refused because state cannot be attributed (collisions under
// --on-collision fail, ambiguous keys); 2 could not do the job.
int RunRankSet(const RemapCommandOptions& o, CommandOutput& output) {
  auto set = OpenAndMatchRankSet(o);
  if (!set.ok()) return ReportError(output, kName, set.status(), o.json);
  Status no_dir = RequireOutputDirectory(o.output);
  if (!no_dir.ok()) return ReportError(output, kName, no_dir, o.json);
  std::vector<RemapResult> remapped;
  std::vector<std::string> outputs;
  for (size_t r = 0; r < set->ranks.size(); ++r) {
    const MatchedState& m = set->ranks[r];
    outputs.push_back((std::filesystem::path(o.output) / std::filesystem::path(set->files[r]).filename()).string());
    Status s = RefuseInputAsOutput({set->files[r]}, outputs.back());
    if (!s.ok()) return ReportError(output, kName, s, o.json);
    auto one = RemapState(std::move(m.file->checkpoint()), m.state, m.params, m.match, ToRemapOptions(o));
    if (!one.ok()) {
      s = std::move(one).status().WithContext(set->files[r] + " (rank " + std::to_string(r) + ")");
      ReportError(output, kName, s, o.json);
      return s.code() == StatusCode::kInvalidArgument ? kExitFindings : kExitError;
    }
    s = NothingCarriedOver(set->files[r] + " (rank " + std::to_string(r) + ")", m.state, *one);
    if (!s.ok()) {
      ReportError(output, kName, s, o.json);
      return kExitFindings;
    }
    remapped.push_back(std::move(*one));
  }
  // Every rank is written under a hidden name first and renamed only when all
  // are: a failure on rank r (a full disk) leaves neither a half-remapped set
  // nor a replaced earlier output.
  OutputGroup group;
  std::vector<WriteReport> reports;
  for (size_t r = 0; r < set->ranks.size(); ++r) {
    const MatchedState& m = set->ranks[r];
    WriteOptions wo = ToWriteOptions(o);
    wo.named_after = outputs[r];
    auto written = WriteCheckpoint(*m.file, remapped[r].checkpoint, remapped[r].checkpoint.graph.root,
                                   group.Pending(outputs[r]), wo);
    if (!written.ok()) {
      return ReportError(output, kName,
                         std::move(written).status().WithContext(outputs[r] + " (rank " + std::to_string(r) +
                                                                 "; no rank's output was written)"),
                         o.json);
    }
    reports.push_back(std::move(*written));
  }
  Status committed = group.Commit(ToWriteOptions(o).durability);
  if (!committed.ok()) return ReportError(output, kName, committed, o.json);
  nlohmann::ordered_json doc = {{"global_shapes", set->global_shapes}, {"ranks", nlohmann::ordered_json::array()}};
  for (size_t r = 0; r < set->ranks.size(); ++r) {
    const MatchedState& m = set->ranks[r];
    if (o.json || !o.report.empty()) {
      doc["ranks"].push_back(ReportJson(o, set->files[r], outputs[r], m, remapped[r], reports[r]));
    }
    if (!o.json) {
      output.out << "rank " << r << ": ";
      WriteText(o, outputs[r], m, remapped[r], reports[r], output.out);
    }
  }
  if (!o.report.empty()) {
    Status s = WriteFileAtomically(o.report, JsonText(doc));
    if (!s.ok()) return ReportError(output, kName, s, o.json);
  }
  if (o.json) WriteJson(output, doc);
  if (!o.json) output.out << "global shapes: " << set->global_shapes << "\n";
  return kExitOk;
}

int RunRemap(const RemapCommandOptions& o, CommandOutput& output) {
  if (o.paths.size() > 1 || o.models.size() > 1) return RunRankSet(o, output);
  Status refused = RefuseInputAsOutput({o.path()}, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  auto m = OpenAndMatch(o.path(), o.state_key, o.params, o.read, o.match);
  if (!m.ok()) return ReportError(output, kName, m.status(), o.json);
  if (o.to == "fqn" && !m->order_ambiguous.empty()) {
    // Index keys stay right whatever the order; names would not.
    const std::string list = FirstNames(m->order_ambiguous);
    ReportError(output, kName,
                InvalidArgumentError(o.path() + ": --to fqn needs each index's parameter, but " + m->order + ": " +
                                     list + "; give --manifest (the training script's order) or keep --to index"),
                o.json);
    return kExitFindings;
  }
  auto remapped = RemapState(std::move(m->file->checkpoint()), m->state, m->params, m->match, ToRemapOptions(o));
  if (!remapped.ok()) {
    Status s = std::move(remapped).status().WithContext(o.path());
    ReportError(output, kName, s, o.json);
    return s.code() == StatusCode::kInvalidArgument ? kExitFindings : kExitError;
  }
  Status nothing = NothingCarriedOver(o.path(), m->state, *remapped);
  if (!nothing.ok()) {
    ReportError(output, kName, nothing, o.json);
    return kExitFindings;
  }
  auto written =
      WriteCheckpoint(*m->file, remapped->checkpoint, remapped->checkpoint.graph.root, o.output, ToWriteOptions(o));
  if (!written.ok()) return ReportError(output, kName, std::move(written).status().WithContext(o.output), o.json);
  if (o.json || !o.report.empty()) {  // the per-entry JSON of 10^5 entries is not built for nothing
    nlohmann::ordered_json doc = ReportJson(o, o.path(), o.output, *m, *remapped, *written);
    if (!o.report.empty()) {
      Status s = WriteFileAtomically(o.report, JsonText(doc));
      if (!s.ok()) return ReportError(output, kName, s, o.json);
    }
    if (o.json) {
      WriteJson(output, doc);
      return kExitOk;
    }
  }
  WriteText(o, o.output, *m, *remapped, *written, output.out);
  return kExitOk;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Rewrite optimizer state keys so torch.optim maps them to the right parameters\n"
    "(pointer, string and (Parameter, i) keys to indices or FQNs; split views nested per view)",
    "\nExit codes: 0 written; 1 refused because state cannot be attributed; 2 could not do the job.\n"
    "\nExamples:\n"
    "  optstate remap --manifest params.json heavyball.pt -o fixed.pt\n"
    "  optstate remap --model model.pt --to fqn heavyball_optim.pt -o fixed.pt\n"
    "  optstate remap checkpoint.pt -o fixed.pt   # parameters from its own 'model' entry\n"
    "  optstate remap --manifest params.json --to fqn --report remap.json ckpt.pt -o fixed.pt\n"
    "  optstate remap --manifest params.json --on-collision drop fsdp.pt -o fixed.pt\n"
    "  optstate remap rank0.optim.pt rank1.optim.pt --model rank0.model.pt --model rank1.model.pt \\\n"
    "      --on-collision reset -o fixed/   # a sharded save: fixed/rank0.optim.pt, fixed/rank1.optim.pt",
};

CommandRunner AddRemapCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunRemap);
}

}  // namespace optstate::tools
