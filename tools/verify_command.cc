// `optstate verify FILE [--model F | --manifest M]`: does the AdamW state
// belong to, and act on, the model's parameters?
#include "commands.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/collisions.h"
#include "optstate/dcp.h"
#include "optstate/optimizer.h"
#include "optstate/validate.h"
#include "optstate/zero.h"
#include "shared_flags.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "verify";

struct VerifyCommandOptions : StateInputs {
  bool json = false;
  VerifyOptions verify;
};

void DeclareFlags(CLI::App& cmd, VerifyCommandOptions& o) {
  AddCheckpointPaths(cmd, "path", o.paths,
                     "Checkpoint holding the optimizer state; several: the per-rank files of one sharded save");
  AddParamSourceFlags(cmd, o.params, o.models);
  AddStateKeyFlag(cmd, o.state_key);
  cmd.add_option("--probe-seed", o.verify.probe_seed, "Seed of the probe gradient")->capture_default_str();
  cmd.add_option("--optimizer", o.verify.optimizer,
                 "The algorithm the state was saved by, when the file's fields do not say it the way you\n"
                 "know it (default: recognised from state fields and group keys)")
      ->check(CLI::IsMember({"adam", "adamw", "sgd", "adagrad", "rmsprop"}));
  AddJsonFlag(cmd, o.json, "verify", "Write JSON");
  AddReadLimitFlags(cmd, o.read);
}

nlohmann::ordered_json ReportJson(const std::string& file, const MatchedState& m, const VerifyReport& r) {
  nlohmann::ordered_json doc = {{"file", file}, {"params_source", ParamSourceJson(m)},
                                {"state_path", m.state.path}, {"scheme", KeyKindName(m.state.scheme)},
                                {"algorithm", r.algorithm}, {"replay_applicable", r.replay_applicable},
                                {"replayed_with", r.replayed_with},
                                {"params", r.params}, {"replayed", r.replayed},
                                {"values_from_model", r.values_from_model}, {"cold", r.cold},
                                {"notes", r.notes}};
  doc["findings"] = nlohmann::ordered_json::array();
  for (const VerifyFinding& f : r.findings) {
    doc["findings"].push_back({{"param", f.param}, {"check", f.check}, {"message", f.message}});
  }
  doc["clean"] = r.findings.empty();
  return doc;
}

void WriteText(const VerifyCommandOptions& o, const std::string& file, const MatchedState& m, const VerifyReport& r,
               std::ostream& out) {
  out << file << ": optimizer state at " << (m.state.path.empty() ? "(root)" : m.state.path) << ", keys "
      << KeyKindName(m.state.scheme) << "\n";
  WriteParamSourceText(m, out);
  out << "  algorithm    " << r.algorithm << "\n";
  if (!r.replay_applicable) {
    out << "  replayed     not applicable: verify replays SGD, Adam, AdamW, Adagrad, RMSprop\n";
  } else {
    out << "  replayed     " << r.replayed << " of " << r.params << " parameters, one " << r.replayed_with << " step each from "
      << (r.values_from_model        ? "the model's values"
          : !o.params.manifest.empty() ? "synthetic values (a manifest has none)"
          : m.params_from_state        ? "synthetic values (no model)"
                                       : "synthetic values where the model's do not fit (DTensor shards)")
      << "\n";
  }
  out << "  cold         " << r.cold.size() << (r.cold.empty() ? "" : ": state missing, zero or unmapped") << "\n";
  for (const std::string& n : r.notes) out << "  note: " << n << "\n";
  if (r.findings.empty()) {
    out << (!r.replay_applicable ? "clean: every parameter has state that fits it (whether it changes the update "
                                   "was not replayed)\n"
            : r.replayed == 0    ? "clean: the algorithm keeps no state here, so there was nothing to replay\n"
                                 : "clean: every parameter has state that fits it and changes its update\n");
  } else {
    out << r.findings.size() << (r.findings.size() == 1 ? " finding:\n" : " findings:\n");
    for (const VerifyFinding& f : r.findings) {
      out << "  " << f.check << "  " << (f.param.empty() ? "" : OneLine(f.param) + ": ") << OneLine(f.message) << "\n";
    }
  }
}

// Several files: each rank's shards replayed against its own model's shards,
// after the ranks have been checked against each other.
// Exit 0 clean, 1 findings, 2 unreadable.
int RunRankSet(const VerifyCommandOptions& o, CommandOutput& output) {
  auto set = OpenAndMatchRankSet(o);
  if (!set.ok()) return ReportError(output, kName, set.status(), o.json);
  nlohmann::ordered_json doc = {{"global_shapes", set->global_shapes}, {"ranks", nlohmann::ordered_json::array()}};
  bool clean = true;
  for (size_t r = 0; r < set->ranks.size(); ++r) {
    auto report = VerifyState(set->ranks[r], o.verify);
    if (!report.ok()) {
      return ReportError(output, kName, std::move(report).status().WithContext(set->files[r]), o.json);
    }
    clean &= report->findings.empty();
    doc["ranks"].push_back(ReportJson(set->files[r], set->ranks[r], *report));
    if (!o.json) {
      output.out << "rank " << r << ": ";
      WriteText(o, set->files[r], set->ranks[r], *report, output.out);
    }
  }
  if (o.json) WriteJson(output, doc);
  return clean ? kExitOk : kExitFindings;
}

// An error about the scratch copy of a DCP directory names the directory.
Status NameInput(const Status& s, const std::string& scratch, const std::string& input) {
  std::string text(s.message());
  if (scratch == input) return s;
  for (size_t at = text.find(scratch); at != std::string::npos; at = text.find(scratch, at)) {
    text.replace(at, scratch.size(), input);
  }
  return Status(s.code(), text);
}

// Verifies `path`, reported as `shown` (the user's input when `path` is a
// scratch consolidation of it), with `note` first among the notes.
int VerifyOne(const VerifyCommandOptions& o, const std::string& path, const std::string& shown, ParamSource source,
              const std::string& note, CommandOutput& output) {
  auto m = OpenAndMatch(path, o.state_key, source, o.read, o.match);
  if (!m.ok()) return ReportError(output, kName, NameInput(m.status(), path, shown), o.json);
  auto report = VerifyState(*m, o.verify);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.path()), o.json);
  if (path != shown) {  // name what the user gave, not the scratch copy
    for (size_t at = m->params_from.find(path); at != std::string::npos; at = m->params_from.find(path, at)) {
      m->params_from.replace(at, path.size(), shown);
    }
  }
  if (!note.empty()) report->notes.insert(report->notes.begin(), note);
  if (o.json) {
    WriteJson(output, ReportJson(shown, *m, *report));
  } else {
    WriteText(o, shown, *m, *report, output.out);
  }
  return report->findings.empty() ? kExitOk : kExitFindings;
}

// A DeepSpeed ZeRO directory: its partitions consolidated per parameter (index
// keys, fp32 master weights as the model) into a scratch copy, then verified.
int RunZeroDir(const VerifyCommandOptions& o, const std::string& tag_dir, CommandOutput& output) {
  auto zero = OpenZeroCheckpoint(tag_dir, o.read);
  if (!zero.ok()) return ReportError(output, kName, zero.status(), o.json);
  std::error_code ec;
  auto c = ConsolidateZeroToScratch(**zero, std::filesystem::temp_directory_path(ec).string());
  if (!c.ok()) return ReportError(output, kName, c.status(), o.json);
  const ZeroConsolidateReport& r = c->report;
  ParamSource source = o.params;
  source.state_shapes_when_none = true;
  return VerifyOne(o, c->file.path, o.path(), source,
                   "a DeepSpeed ZeRO-" + std::to_string((*zero)->stage) + " directory of " +
                       std::to_string((*zero)->world_size) + " ranks: verified on its consolidation (" +
                       std::to_string(r.state_entries) + " state entries and " + std::to_string(r.trainable) +
                       " fp32 master weights from " + std::to_string(r.pieces) +
                       " partition ranges), a scratch copy removed after",
                   output);
}

int RunVerify(const VerifyCommandOptions& o, CommandOutput& output) {
  if (o.paths.size() > 1 || o.models.size() > 1) return RunRankSet(o, output);
  ParamSource source = o.params;
  source.state_shapes_when_none = true;  // an optimizer.pt alone: replay on its own shapes
  std::string path = o.path();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) && !IsDcpDirectory(path)) {
    // A framework's directory: its optimizer file, against the model file beside it.
    auto fd = FindFrameworkFiles(path);
    if (!fd.ok()) return ReportError(output, kName, fd.status(), o.json);
    if (fd->layout == "deepspeed") return RunZeroDir(o, fd->TagDirectory(path), output);
    const FrameworkFile* optimizer = fd->Find("optimizer");
    const FrameworkFile* model = fd->Find("model");
    if (optimizer == nullptr) {
      return ReportError(output, kName, NotFoundError(path + ": " + fd->layout + " directory without an optimizer "
                                                      "file"), o.json);
    }
    path = optimizer->path;
    if (model != nullptr && source.manifest.empty() && source.model.empty()) source.model = model->path;
  }
  // A DCP directory: consolidated as dcp_to_torch_save would, into a scratch
  // copy in the temporary directory (never beside the input), then verified.
  if (IsDcpDirectory(path)) {
    ConsolidateOptions co;
    co.read = o.read;
    auto c = ConsolidateDcpToScratch(path, std::filesystem::temp_directory_path(ec).string(), co);
    if (!c.ok()) return ReportError(output, kName, c.status(), o.json);  // its messages name the files
    return VerifyOne(o, c->file.path, o.path(), source,
                     "a DCP directory: verified on its consolidation (" + std::to_string(c->report.tensors) +
                         " tensors from " + std::to_string(c->report.chunks) +
                         " chunks, FQN keys as dcp_to_torch_save gives them), a scratch copy removed after",
                     output);
  }
  return VerifyOne(o, path, path, source, "", output);
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Check that optimizer state belongs to and acts on the model's parameters: shapes, steps,\n"
    "finite values, and a replayed step of its algorithm (SGD, Adam, AdamW, Adagrad, RMSprop,\n"
    "HeavyBall 3.x AdamW) that tells live state from cold (missing, zero or unmapped)",
    "\nExit codes: 0 clean; 1 findings; 2 unreadable.\n"
    "\nExamples:\n"
    "  optstate verify checkpoint.pt                 # the parameters from its own 'model' entry\n"
    "  optstate verify --model model.pt optimizer.pt\n"
    "  optstate verify checkpoints/step_1000         # DCP: consolidated to a scratch copy in $TMPDIR\n"
    "  optstate verify output/checkpoint-500         # HF Trainer / accelerate: optimizer vs model file\n"
    "  optstate verify --manifest params.json --json optimizer.pt\n"
    "  optstate verify rank0.optim.pt rank1.optim.pt --model rank0.model.pt --model rank1.model.pt",
};

CommandRunner AddVerifyCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunVerify);
}

}  // namespace optstate::tools
