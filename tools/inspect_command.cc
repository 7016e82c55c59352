#include "inspect_command.h"

#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp.h"
#include "optstate/validate.h"
#include "optstate/checkpoint.h"
#include "each_checkpoint.h"
#include "shared_flags.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "inspect";

void DeclareFlags(CLI::App& cmd, InspectOptions& o) {
  AddCheckpointPaths(cmd, "paths", o.paths,
                     "torch.save file (.pt, .pth, .bin), legacy format, .zst, a DCP checkpoint directory, or a\n"
                     "DeepSpeed ZeRO directory (stage, ranks, where each parameter's pieces lie);\n"
                     "or every rank's file of one FSDP2/TP save (in rank order or named rank<N>): the layout is\n"
                     "checked as unshard checks it, then each rank's file is shown");
  AddJsonFlag(cmd, o.json, "inspect", "Write JSON");
  cmd.add_option("--depth", o.report.depth, "Tree levels to show below the start")->capture_default_str();
  cmd.add_option("--path", o.report.path,
                 "Start the tree at this object, written as the tree shows paths: state.3,\n"
                 "optimizer.param_groups[0], state[\"fc1.weight\"], state[(0, (8, 8))]");
  cmd.add_option("--max-items", o.report.max_items, "Children shown per container")->capture_default_str();
  cmd.add_flag("--records", o.records,
               "List every zip record with size, data offset and CRC-32 (reads every local header)");
  cmd.add_flag("--verify-crc", o.read.verify_crc, "Recompute every record's CRC-32 (torch.load never does)");
  AddEachFlags(cmd, o.each, o.jobs,
               "Every path its own checkpoint (not the ranks of one save); a directory that is no checkpoint\n"
               "itself is searched for files, DCP and DeepSpeed directories: each one shown in the order\n"
               "found, then a summary; with --json one document (exit 2 if any could not be read)",
               "read");
  AddReadLimitFlags(cmd, o.read);
}

// After a file failed to read: what torch.load would still run of it (a
// CRC-damaged or broken pickle runs up to its break), on stderr beside the
// error, so the failure does not hide a dangerous call. validate gates on it.
void ReportWhatTorchLoadWouldRun(const std::string& path, const ReadOptions& read, const Status& error,
                                 CommandOutput& output) {
  std::optional<UnreadableScan> judged = ScanWhatTorchLoadWouldRunOf(path, error, read.pickle);
  if (!judged) return;
  UnreadableScan& scan = *judged;
  std::erase_if(scan.findings, [](const Finding& f) { return f.severity == Severity::kInfo; });
  if (scan.findings.empty()) return;
  output.err << "optstate " << kName << ": what torch.load would still run of it (" << scan.scanned
             << "; optstate validate reports it too):\n";
  for (const Finding& f : scan.findings) {
    output.err << "  " << SeverityName(f.severity) << " [" << f.code << "] " << OneLine(f.where) << ": "
               << OneLine(f.message) << "\n";
  }
}

}  // namespace

int RunInspect(const InspectOptions& given, CommandOutput& output) {
  InspectOptions options = given;
  if (options.paths.empty()) options.paths.push_back(options.path);  // callers that set only path
  options.path = options.paths[0];
  if (options.each) {
    EachOptions each;
    each.command = kName;
    each.paths = options.paths;
    each.find.framework_directories = false;  // HF Trainer's and accelerate's files one by one
    each.jobs = options.jobs;
    each.json = options.json;
    return RunEach(each, output, [&](const std::string& path, CommandOutput& one_output) {
      InspectOptions one = options;
      one.each = false;
      one.paths = {path};
      return RunInspect(one, one_output);
    });
  }
  if (options.paths.size() > 1) return RunInspectRankSet(options, output);
  if (IsDcpDirectory(options.path)) return RunInspectDcp(options, output);
  std::error_code ec;
  if (std::filesystem::is_directory(options.path, ec)) {
    auto fd = FindFrameworkFiles(options.path);
    if (fd.ok() && fd->layout == "deepspeed") return RunInspectZero(options, fd->TagDirectory(options.path), output);
  }
  ReadOptions read = options.read;
  read.resolve_offsets = options.records;  // the listing shows data offsets
  StatusOr<std::unique_ptr<CheckpointFile>> file = OpenCheckpoint(options.path, read);
  if (!file.ok()) {
    int rc = ReportError(output, kName, file.status(), options.json);
    if (!options.json) ReportWhatTorchLoadWouldRun(options.path, read, file.status(), output);
    return rc;
  }
  StatusOr<InspectReport> report = BuildInspectReport(**file, options.report);
  if (!report.ok()) {
    return ReportError(output, kName, std::move(report).status().WithContext(options.path), options.json);
  }
  const Checkpoint& checkpoint = (*file)->checkpoint();
  if (options.json) {
    WriteJson(output, InspectJson(options, checkpoint, *report));
  } else {
    WriteInspectText(options, checkpoint, *report, output.out);
  }
  return kExitOk;
}

constexpr CommandHelp kHelp = {
    kName,
    "Show what is inside a checkpoint without loading tensors: container, object tree,\n"
    "optimizer state summary, and security findings (globals a pickle load would call)",
    "\nExamples:\n"
    "  optstate inspect checkpoint.pt\n"
    "  optstate inspect --path optimizer.state --depth 2 checkpoint.pt\n"
    "  optstate inspect --path 'state[(0, (8, 8))]' heavyball_fsdp.pt\n"
    "  optstate inspect --records --verify-crc checkpoint.pt\n"
    "  optstate inspect --json checkpoint.pt.zst | jq .optimizers\n"
    "  optstate inspect checkpoints/step_1000        (a DCP directory: files, chunks, rebuilt tree)\n"
    "  optstate inspect ds_out/global_step3          (DeepSpeed ZeRO: ranks, partitions, fragments)\n"
    "  optstate inspect ckpt/optim_rank*.pt            (one sharded save: layout, then every rank)\n"
    "  optstate inspect --each --json runs/ > zoo.json (every checkpoint under runs/, on every core)",
};

CommandRunner AddInspectCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunInspect);
}

}  // namespace optstate::tools
