// `optstate migrate FILE... [--manifest M | --model F...] --to heavyball3 -o OUT`:
// legacy HeavyBall optimizer state rewritten as today's HeavyBall saves it.
#include "commands.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint_writer.h"
#include "optstate/inspect_report.h"
#include "optstate/state_migrate.h"
#include "optstate/unshard.h"
#include "cli_layout.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "migrate";

struct MigrateCommandOptions : StateInputs {
  std::string output;
  std::string to = "heavyball3";
  std::string on_collision = "fail";
  std::optional<int64_t> steps;
  std::optional<int64_t> precondition_frequency;
  std::string report;
  bool json = false;
  bool no_sync = false;
};

void DeclareFlags(CLI::App& cmd, MigrateCommandOptions& o) {
  AddCheckpointPaths(cmd, "input", o.paths,
                     "Optimizer checkpoint; several: the per-rank files of one sharded save (unsharded first,\n"
                     "into a scratch directory beside the output; one file comes out)");
  AddOutputFileFlag(cmd, o.output);
  AddParamSourceFlags(cmd, o.params, o.models);
  cmd.add_option("--to", o.to,
                 "heavyball3: HeavyBall 3.2's layout; torch: torch.optim.AdamW's (AdamW family only; moments\n"
                 "rescaled from HeavyBall's bias-corrected form, step per parameter; torch has no SOAP)")
      ->check(CLI::IsMember({"heavyball3", "torch"}))
      ->capture_default_str();
  cmd.add_option("--on-collision", o.on_collision,
                 "State merged across parameters: fail; drop it; share (a copy each); reset (fresh zero state;\n"
                 "SOAP: no state, so 3.x rebuilds the preconditioner)")
      ->check(CLI::IsMember({"fail", "reset", "share", "drop"}))
      ->capture_default_str();
  cmd.add_option("--steps", o.steps,
                 "Optimizer steps taken, where the file does not say (HeavyBall 0.x with foreach=False saves\n"
                 "its group counter as 0)")
      ->check(IntegerRange(0, int64_t{1} << 40));
  cmd.add_option("--precondition-frequency", o.precondition_frequency,
                 "SOAP's precondition_frequency, where the file does not say (HeavyBall 1.6 saves none;\n"
                 "default its constructor's 2)")
      ->check(IntegerRange(1, int64_t{1} << 20));
  AddStateKeyFlag(cmd, o.state_key);
  AddWriteFlags(cmd, o.no_sync, o.read.verify_crc);
  cmd.add_option("--report", o.report, "Write the report (every input entry's fate, renames, notes) as JSON");
  AddJsonFlag(cmd, o.json, "migrate", "Write the report to stdout as JSON");
  AddReadLimitFlags(cmd, o.read);
}

CollisionPolicy Policy(const std::string& p) {
  return p == "drop" ? CollisionPolicy::kDrop
         : p == "share" ? CollisionPolicy::kShare
         : p == "reset" ? CollisionPolicy::kReset
                        : CollisionPolicy::kFail;
}

nlohmann::ordered_json ReportJson(const MigrateCommandOptions& o, const MatchedState& m, const MigrateResult& r,
                                  const WriteReport& w) {
  using J = nlohmann::ordered_json;
  const RemapResult& e = r.remap;
  J doc = {{"inputs", o.paths}, {"output", o.output}, {"to", o.to}, {"params_source", ParamSourceJson(m)},
           {"state_path", m.state.path}, {"input_scheme", KeyKindName(m.state.scheme)}, {"algorithm", r.algorithm},
           {"steps", r.steps}, {"steps_from", r.steps_from}, {"on_collision", o.on_collision},
           {"moved", e.moved}, {"shared", e.shared}, {"reset", e.reset}, {"dropped", e.dropped},
           {"renamed", r.renamed}, {"notes", r.notes}};
  AppendWrittenFileJson(w, doc);
  doc["entries"] = RemapEntriesJson(e.entries);
  return doc;
}

void WriteText(const MigrateCommandOptions& o, const MatchedState& m, const MigrateResult& r, const WriteReport& w,
               std::ostream& out) {
  const RemapResult& e = r.remap;
  out << o.output << ": " << HumanBytes(w.bytes) << "; " << r.algorithm
      << (o.to == "torch" ? " as torch.optim.AdamW saves it\n" : " as HeavyBall 3.2 saves it\n");
  WriteParamSourceText(m, out);
  out << "  " << e.moved << " of " << m.state.keys.size() << " entries carried over, ";
  if (e.shared) out << e.shared << " shared (a copy each), ";
  if (e.reset) out << e.reset << " reset (their values are not carried over), ";
  out << e.dropped << " dropped\n";
  for (const RemapEntry& x : e.entries) {
    if (x.fate == "moved") continue;
    out << "  " << x.fate << " " << x.input_key << ": " << x.reason << "\n";
  }
  out << "  step counter " << r.steps << ", from " << r.steps_from << "\n";
  for (const std::string& n : r.renamed) out << "  renamed " << n << "\n";
  for (const std::string& n : r.notes) out << "  note: " << n << "\n";
  out << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(w) << "\n";
}

// Exit 0 written; 1 refused because state cannot be attributed, or nothing
// would be carried over; 2 could not do the job (unsupported algorithm, bad input).
int RunMigrate(const MigrateCommandOptions& o, CommandOutput& output) {
  Status refused = RefuseInputAsOutput(o.paths, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  // A rank set (and its models) is unsharded first, beside the output: one file out.
  UnshardOptions uo;
  uo.read = o.read;
  std::unique_ptr<UnshardedRankSet> optim_set, model_set;
  std::string input = o.paths.at(0);
  ParamSource params = o.params;
  if (o.paths.size() > 1) {
    auto set = UnshardedRankSet::Create(o.paths, o.output, uo);
    if (!set.ok()) return ReportError(output, kName, set.status(), o.json);
    optim_set = std::move(*set);
    input = optim_set->file().path();
  }
  if (o.models.size() > 1) {
    auto set = UnshardedRankSet::Create(o.models, o.output + ".model", uo);
    if (!set.ok()) return ReportError(output, kName, set.status(), o.json);
    model_set = std::move(*set);
    params.model = model_set->file().path();
  } else if (o.models.size() == 1) {
    params.model = o.models[0];
  }
  auto m = OpenAndMatch(input, o.state_key, params, o.read, o.match);
  if (!m.ok()) return ReportError(output, kName, m.status(), o.json);
  // Name what the user gave, not the scratch files.
  auto label = [](const std::vector<std::string>& files) {
    return "rank set of " + std::to_string(files.size()) + " files (" + files.front() + " ... " + files.back() +
           "), unsharded";
  };
  auto rename = [](std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); !from.empty() && at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  };
  if (optim_set) rename(m->params_from, optim_set->file().path(), label(o.paths));
  if (model_set) rename(m->params_from, model_set->file().path(), label(o.models));
  MigrateOptions mo;
  mo.on_collision = Policy(o.on_collision);
  mo.steps = o.steps;
  mo.precondition_frequency = o.precondition_frequency;
  mo.input_bytes = m->file->bytes();
  auto migrated = MigrateState(m->file->checkpoint(), m->state, m->params, m->match, mo);
  if (!migrated.ok()) {
    Status s = std::move(migrated).status().WithContext(o.paths.at(0));
    ReportError(output, kName, s, o.json);
    return s.code() == StatusCode::kInvalidArgument ? kExitFindings : kExitError;
  }
  const RemapResult& e = migrated->remap;
  if (!m->state.keys.empty() && e.moved + e.shared + e.reset == 0) {
    ReportError(output, kName,
                InvalidArgumentError(o.paths.at(0) + ": none of its " + std::to_string(m->state.keys.size()) +
                                     " state entries could be carried over (see `optstate collisions`); nothing "
                                     "was written"),
                o.json);
    return kExitFindings;
  }
  WriteOptions wo;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  wo.named_after = o.output;
  StatusOr<WriteReport> written = WriteReport();
  if (o.to == "torch") {
    // The 3.x layout is the common form; torch's is made from it (migrate_to_torch.cc).
    TorchConversion conversion;
    written = WriteAsTorchAdamW(*m->file, m->state, *migrated, o.output, wo, &conversion);
    if (!written.ok()) {
      Status s = std::move(written).status().WithContext(o.paths.at(0));
      ReportError(output, kName, s, o.json);
      return s.code() == StatusCode::kInvalidArgument ? kExitFindings : kExitError;
    }
    migrated->notes.clear();  // the 3.x layout's notes are not this output's
    migrated->renamed = {"exp_avg / exp_avg_sq kept their names, rescaled (notes)"};
    migrated->notes = conversion.notes;
  } else {
    written = WriteMigrated(*m->file, *migrated, o.output, wo);
  }
  if (!written.ok()) return ReportError(output, kName, std::move(written).status().WithContext(o.output), o.json);
  nlohmann::ordered_json doc = ReportJson(o, *m, *migrated, *written);
  if (!o.report.empty()) {
    Status s = WriteFileAtomically(o.report, JsonText(doc));
    if (!s.ok()) return ReportError(output, kName, s, o.json);
  }
  if (o.json) {
    WriteJson(output, doc);
  } else {
    WriteText(o, *m, *migrated, *written, output.out);
  }
  return kExitOk;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Rewrite legacy HeavyBall optimizer state as HeavyBall 3.x (or torch.optim.AdamW) saves it,\n"
    "so that optimizer trains from it (remap fixes only the keys): the AdamW family of 0.x and\n"
    "1.x, and 0.x ForeachSOAP (its exp_avg rotated into the eigenbasis 3.x keeps it in)",
    "\nExit codes: 0 written; 1 refused because state cannot be attributed or nothing would carry\n"
    "over; 2 could not do the job (an algorithm not migrated yet, unreadable input). Nothing is\n"
    "written unless it exits 0.\n"
    "\nExamples:\n"
    "  optstate migrate old_optim.pt --manifest params.json -o optim_hb3.pt\n"
    "  optstate migrate old_optim.pt --model model.pt --steps 12000 -o optim_hb3.pt --json\n"
    "  optstate migrate rank0.pt rank1.pt --model m0.pt --model m1.pt --on-collision reset -o optim_hb3.pt\n"
    "  optstate migrate old_optim.pt --manifest params.json --to torch -o optim_torch.pt\n"
    "Then: opt = heavyball.AdamW(model.parameters(), ...); opt.load_state_dict(torch.load(\"optim_hb3.pt\"))\n"
    "  (heavyball.SOAP for a SOAP file: the groups and the precondition schedule come from the file)\n"
    "  or: opt = torch.optim.AdamW(model.parameters(), ...); opt.load_state_dict(torch.load(\"optim_torch.pt\"))",
};

CommandRunner AddMigrateCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunMigrate);
}

}  // namespace optstate::tools
