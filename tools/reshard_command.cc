#include "reshard_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp_export.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "reshard";

}  // namespace

int RunReshard(const ReshardOptions& o, CommandOutput& output) {
  auto dcp = OpenDcpCheckpoint(o.input);
  if (!dcp.ok()) return ReportError(output, kName, dcp.status(), o.json);
  DcpWriteOptions wo;
  wo.world_size = o.world_size;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  if (!o.quiet && !o.json) wo.progress = PercentProgress(output.err, kName);
  ReadOptions read;
  read.verify_crc = o.verify_crc;
  auto report = ReshardDcp(**dcp, o.output, wo, read);
  if (!report.ok()) return ReportError(output, kName, report.status(), o.json);
  WriteDcpWriteReport(output, o.input, o.output, o.world_size, *report, o.json);
  return kExitOk;
}

CommandRunner AddReshardCommand(CLI::App& parent) {
  auto o = std::make_shared<ReshardOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Rewrite a DCP checkpoint for another number of ranks (tensors split on dim 0 as FSDP2\n"
             "shards them), one chunk in memory at a time");
  cmd->add_option("input", o->input, "DCP checkpoint directory")->required();
  cmd->add_option("-o,--output", o->output, "New directory; written beside it under a temporary name, then renamed")
      ->required();
  cmd->add_option("--world-size", o->world_size, "Ranks of the output: one __<rank>_0.distcp file each")
      ->required()
      ->check(CLI::Range(1, 65536));
  AddWriteFlags(*cmd, o->no_sync, o->verify_crc);
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/dcp-write.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate reshard checkpoints/step_1000 -o checkpoints/step_1000_8ranks --world-size 8\n"
      "  optstate reshard ckpt_64 -o ckpt_1 --world-size 1 --json");
  return [o](CommandOutput& output) { return RunReshard(*o, output); };
}

}  // namespace optstate::tools
