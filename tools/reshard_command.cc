// `optstate reshard DIR -o DIR2 --world-size M`: a DCP checkpoint rewritten for
// M ranks (tensors split on dim 0 as FSDP2 shards them), bytes items carried
// over unchanged; memory holds one output chunk at a time.
#include "commands.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp.h"
#include "dcp_output.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "reshard";

void DeclareFlags(CLI::App& cmd, DcpOutputFlags& o) { AddDcpOutputFlags(cmd, o, "DCP checkpoint directory"); }

int RunReshard(const DcpOutputFlags& o, CommandOutput& output) {
  std::unique_ptr<DcpCheckpoint> dcp;
  auto open = [&]() -> Status {
    OPTSTATE_ASSIGN_OR_RETURN(dcp, OpenDcpCheckpoint(o.input));
    return Status();
  };
  auto write = [&](const DcpWriteOptions& wo, Coordinator* coordinator) {
    ReadOptions read;
    read.verify_crc = o.verify_crc;
    return ReshardDcp(*dcp, o.output, wo, read, coordinator);
  };
  return RunDcpOutput(o, kName, output, open, write);
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Rewrite a DCP checkpoint for another number of ranks (tensors split on dim 0 as FSDP2\n"
    "shards them), one chunk in memory at a time",
    "\nExamples:\n"
    "  optstate reshard checkpoints/step_1000 -o checkpoints/step_1000_8ranks --world-size 8\n"
    "  optstate reshard ckpt_64 -o ckpt_1 --world-size 1 --json\n"
    "  torchrun --no-python --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node0:29400 \\\n"
    "      optstate reshard --distributed /shared/ckpt -o /shared/ckpt_16 --world-size 16\n"
    "  srun -N 2 -n 2 optstate reshard --distributed /shared/ckpt -o /shared/ckpt_16 --world-size 16\n"
    "      (with MASTER_ADDR and MASTER_PORT exported in the batch script)",
};

CommandRunner AddReshardCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunReshard);
}

}  // namespace optstate::tools
