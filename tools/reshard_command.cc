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
  std::unique_ptr<Coordinator> coordinator;
  if (o.distributed) {
    auto connected = ConnectCoordinator(std::string(kName) + ":" + o.output);
    if (!connected.ok()) return ReportError(output, kName, connected.status(), o.json);
    coordinator = std::move(*connected);
  }
  auto dcp = OpenDcpCheckpoint(o.input);
  Status ready = coordinator ? AgreeToStart(*coordinator, dcp.status()) : dcp.status();
  if (!ready.ok()) return ReportError(output, kName, ready, o.json);
  DcpWriteOptions wo;
  wo.world_size = o.world_size;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  bool reports = !coordinator || coordinator->rank() == 0;  // one report per job
  if (!o.quiet && !o.json && reports) wo.progress = PercentProgress(output.err, kName);
  ReadOptions read;
  read.verify_crc = o.verify_crc;
  auto report = ReshardDcp(**dcp, o.output, wo, read, coordinator.get());
  if (!report.ok()) return ReportError(output, kName, report.status(), o.json);
  if (reports) WriteDcpWriteReport(output, o.input, o.output, o.world_size, *report, o.json);
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
  cmd->add_flag("--distributed", o->distributed,
                "Share the work with the other processes of a torchrun or srun job (RANK/WORLD_SIZE or\n"
                "SLURM_PROCID/SLURM_NTASKS, MASTER_ADDR/MASTER_PORT): each writes its ranks' files\n"
                "into an output directory they all see; rank 0 writes .metadata last");
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/dcp-write.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate reshard checkpoints/step_1000 -o checkpoints/step_1000_8ranks --world-size 8\n"
      "  optstate reshard ckpt_64 -o ckpt_1 --world-size 1 --json\n"
      "  torchrun --no-python --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node0:29400 \\\n"
      "      optstate reshard --distributed /shared/ckpt -o /shared/ckpt_16 --world-size 16\n"
      "  srun -N 2 -n 2 optstate reshard --distributed /shared/ckpt -o /shared/ckpt_16 --world-size 16\n"
      "      (with MASTER_ADDR and MASTER_PORT exported in the batch script)");
  return [o](CommandOutput& output) { return RunReshard(*o, output); };
}

}  // namespace optstate::tools
