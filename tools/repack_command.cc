// `optstate repack IN -o OUT`: rewrite a checkpoint through optstate's own
// writer as a canonical torch.save zip (protocol 2, 64-byte aligned stored
// records): legacy-format and .zst files become ordinary zips, and the report
// says whether torch.load(weights_only=True) will accept the result.
#include "commands.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/collisions.h"
#include "optstate/inspect_report.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "repack";

struct RepackOptions {
  std::string input;                // used when inputs is empty (callers that set one)
  std::vector<std::string> inputs;  // several: the per-rank files of one sharded save
  std::string output;
  bool json = false;
  bool no_sync = false;
  ReadOptions read;
};

void DeclareFlags(CLI::App& cmd, RepackOptions& o) {
  AddCheckpointPaths(cmd, "input", o.inputs,
                     "torch.save file, legacy format, or .zst; several: the per-rank files of one sharded save");
  AddOutputFileFlag(cmd, o.output,
                    "Output file; written to a temporary file beside it, then renamed. With several inputs, an\n"
                    "existing directory that gets one file per rank, named as its input (all or none)");
  AddWriteFlags(cmd, o.no_sync, o.read.verify_crc);
  AddJsonFlag(cmd, o.json, "repack");
  AddReadLimitFlags(cmd, o.read);
}

nlohmann::ordered_json ReportJson(const std::string& input, const std::string& output, const WriteReport& w) {
  return {{"input", input},
          {"output", output},
          {"bytes", w.bytes},
          {"storages", w.storages},
          {"storage_bytes", w.storage_bytes},
          {"weights_only_loadable", w.unsafe_globals.empty()},
          {"unsafe_globals", w.unsafe_globals},
          {"loadable_after_dtensor_import", w.loadable_after_dtensor_import}};
}

void WriteText(const std::string& output, const WriteReport& w, std::ostream& out) {
  out << output << ": " << HumanBytes(w.bytes) << ", " << w.storages << " storages (" << HumanBytes(w.storage_bytes)
      << ")\n";
  out << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(w) << "\n";
}

// Several inputs (one sharded save's ranks): each repacked on its own into
// OUTPUT/<its name>, all under hidden names first and renamed only when every
// rank is written, so a failure leaves none of them.
int RunRankSet(const RepackOptions& o, CommandOutput& output) {
  Status no_dir = RequireOutputDirectory(o.output);
  if (!no_dir.ok()) return ReportError(output, kName, no_dir, o.json);
  auto files = OrderByRank(o.inputs);
  if (!files.ok()) return ReportError(output, kName, files.status(), o.json);
  std::vector<std::string> outputs;
  std::vector<WriteReport> reports;
  OutputGroup group;
  WriteOptions wo;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  for (size_t r = 0; r < files->size(); ++r) {
    const std::string& in = (*files)[r];
    outputs.push_back((std::filesystem::path(o.output) / std::filesystem::path(in).filename()).string());
    Status refused = RefuseInputAsOutput({in}, outputs.back());
    auto file = refused.ok() ? OpenCheckpoint(in, o.read) : StatusOr<std::unique_ptr<CheckpointFile>>(refused);
    if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
    wo.named_after = outputs.back();
    auto w = WriteCheckpoint(**file, (*file)->checkpoint().graph.root, group.Pending(outputs.back()), wo);
    if (!w.ok()) {
      return ReportError(output, kName,
                         std::move(w).status().WithContext(outputs.back() + " (rank " + std::to_string(r) +
                                                           "; no rank's output was written)"),
                         o.json);
    }
    reports.push_back(std::move(*w));
  }
  Status committed = group.Commit(wo.durability);
  if (!committed.ok()) return ReportError(output, kName, committed, o.json);
  nlohmann::ordered_json doc = {{"ranks", nlohmann::ordered_json::array()}};
  for (size_t r = 0; r < outputs.size(); ++r) {
    doc["ranks"].push_back(ReportJson((*files)[r], outputs[r], reports[r]));
    if (!o.json) {
      output.out << "rank " << r << ": ";
      WriteText(outputs[r], reports[r], output.out);
    }
  }
  if (o.json) WriteJson(output, doc);
  return kExitOk;
}

int RunRepack(const RepackOptions& o, CommandOutput& output) {
  if (o.inputs.size() > 1) return RunRankSet(o, output);
  const std::string& input = o.inputs.empty() ? o.input : o.inputs[0];
  Status refused = RefuseInputAsOutput({input}, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  auto file = OpenCheckpoint(input, o.read);
  if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
  WriteOptions wo;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  auto report = WriteCheckpoint(**file, (*file)->checkpoint().graph.root, o.output, wo);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.output), o.json);
  if (o.json) {
    WriteJson(output, ReportJson(input, o.output, *report));
    return kExitOk;
  }
  WriteText(o.output, *report, output.out);
  return kExitOk;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Rewrite a checkpoint as a canonical torch.save zip through optstate's own writer\n"
    "(legacy format and .zst in, zip out; shared storages stay shared)",
    "\nExamples:\n"
    "  optstate repack old_legacy_format.pt -o checkpoint.pt\n"
    "  optstate repack checkpoint.pt.zst -o checkpoint.pt --json\n"
    "  optstate repack ckpt/rank0.pt.zst ckpt/rank1.pt.zst -o plain/",
};

CommandRunner AddRepackCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunRepack);
}

}  // namespace optstate::tools
