#include "export_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp_export.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "export";

}  // namespace

int RunExport(const ExportOptions& o, CommandOutput& output) {
  auto file = OpenCheckpoint(o.input, o.read);
  if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
  for (const Finding& f : (*file)->checkpoint().findings) {
    if (f.severity == Severity::kError) {
      return ReportError(output, kName,
                         UnsupportedError(o.input + ": " + f.where + ": " + f.message + " Nothing was written."), o.json);
    }
  }
  DcpWriteOptions wo;
  wo.world_size = o.world_size;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  if (!o.quiet && !o.json) wo.progress = PercentProgress(output.err, kName);
  auto report = ExportToDcp(**file, o.output, wo);
  if (!report.ok()) return ReportError(output, kName, report.status(), o.json);
  WriteDcpWriteReport(output, o.input, o.output, o.world_size, *report, o.json);
  return kExitOk;
}

CommandRunner AddExportCommand(CLI::App& parent) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Write a torch.save file as a DCP checkpoint of M ranks (what torch_save_to_dcp does,\n"
             "sharded on dim 0 like FSDP2), for dcp.load into a sharded model");
  cmd->add_option("input", o->input, "torch.save file (.pt), legacy format, or .zst")->required();
  cmd->add_option("-o,--output", o->output, "New directory; written beside it under a temporary name, then renamed")
      ->required();
  cmd->add_option("--world-size", o->world_size, "Ranks of the output: one __<rank>_0.distcp file each")
      ->required()
      ->check(CLI::Range(1, 65536));
  AddWriteFlags(*cmd, o->no_sync, o->read.verify_crc);
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/dcp-write.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate export consolidated.pt -o checkpoints/step_1000 --world-size 8\n"
      "  optstate export model_and_optim.pt -o dcp_dir --world-size 2 --json\n"
      "Optimizer state keyed 0..N-1 comes out keyed \"0\"..\"N-1\" (DCP makes every key a str),\n"
      "as with torch's own torch_save_to_dcp: export FQN-keyed state (consolidate --to fqn, remap --to fqn).");
  return [o](CommandOutput& output) { return RunExport(*o, output); };
}

}  // namespace optstate::tools
