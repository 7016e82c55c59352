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
  std::unique_ptr<Coordinator> coordinator;
  if (o.distributed) {
    auto connected = ConnectCoordinator(std::string(kName) + ":" + o.output);
    if (!connected.ok()) return ReportError(output, kName, connected.status(), o.json);
    coordinator = std::move(*connected);
  }
  auto file = OpenCheckpoint(o.input, o.read);
  Status opened = file.status();
  if (opened.ok()) {
    for (const Finding& f : (*file)->checkpoint().findings) {
      if (f.severity == Severity::kError) {
        opened = UnsupportedError(o.input + ": " + f.where + ": " + f.message + " Nothing was written.");
        break;
      }
    }
  }
  Status ready = coordinator ? AgreeToStart(*coordinator, opened) : opened;
  if (!ready.ok()) return ReportError(output, kName, ready, o.json);
  DcpWriteOptions wo;
  wo.world_size = o.world_size;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  bool reports = !coordinator || coordinator->rank() == 0;  // one report per job
  if (!o.quiet && !o.json && reports) wo.progress = PercentProgress(output.err, kName);
  auto report = ExportToDcp(**file, o.output, wo, coordinator.get());
  if (!report.ok()) return ReportError(output, kName, report.status(), o.json);
  if (reports) WriteDcpWriteReport(output, o.input, o.output, o.world_size, *report, o.json);
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
  cmd->add_flag("--distributed", o->distributed,
                "Share the work with the other processes of a torchrun or srun job (RANK/WORLD_SIZE or\n"
                "SLURM_PROCID/SLURM_NTASKS, MASTER_ADDR/MASTER_PORT): each writes its ranks' files\n"
                "into an output directory they all see; rank 0 writes .metadata last");
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
