#include "export_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp_export.h"
#include "optstate/unshard.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "export";

}  // namespace

int RunExport(DcpOutputFlags o, CommandOutput& output) {
  o.input = o.inputs.at(0);
  const bool rank_set = o.inputs.size() > 1;
  if (rank_set && o.distributed) {
    return ReportError(output, kName,
                       InvalidArgumentError("--distributed takes one file: unshard the rank files first "
                                            "(optstate unshard ... -o whole.pt), then export whole.pt"),
                       o.json);
  }
  Status refused = RefuseInputAsOutput(o.inputs, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  std::unique_ptr<CheckpointFile> own;
  std::unique_ptr<UnshardedRankSet> unsharded;
  const CheckpointFile* file = nullptr;
  auto open = [&]() -> Status {
    ReadOptions read;
    read.verify_crc = o.verify_crc;
    if (rank_set) {
      UnshardOptions uo;
      uo.read = read;
      OPTSTATE_ASSIGN_OR_RETURN(unsharded, UnshardedRankSet::Create(o.inputs, o.output, uo));
      file = &unsharded->file();
    } else {
      OPTSTATE_ASSIGN_OR_RETURN(own, OpenCheckpoint(o.input, read));
      file = own.get();
    }
    for (size_t r = 0; r < o.inputs.size(); ++r) {
      // A rank set's findings are rank 0's (the unsharded file keeps its graph); check every rank's.
      std::unique_ptr<CheckpointFile> each;
      const CheckpointFile* f = file;
      if (rank_set) {
        OPTSTATE_ASSIGN_OR_RETURN(each, OpenCheckpoint(o.inputs[r], read));
        f = each.get();
      }
      for (const Finding& finding : f->checkpoint().findings) {
        if (finding.severity == Severity::kError) {
          return UnsupportedError(o.inputs[r] + ": " + finding.where + ": " + finding.message + " Nothing was written.");
        }
      }
    }
    return Status();
  };
  auto write = [&](const DcpWriteOptions& wo, Coordinator* coordinator) {
    return ExportToDcp(*file, o.output, wo, coordinator);
  };
  return RunDcpOutput(o, kName, output, open, write);
}

CommandRunner AddExportCommand(CLI::App& parent) {
  auto o = std::make_shared<DcpOutputFlags>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Write a torch.save file as a DCP checkpoint of M ranks (what torch_save_to_dcp does,\n"
             "sharded on dim 0 like FSDP2), for dcp.load into a sharded model");
  AddDcpOutputFlags(*cmd, *o,
                    "torch.save file (.pt), legacy format, or .zst; or every rank's file of one FSDP2/TP save\n"
                    "(DTensor shards, in rank order or named rank<N>), unsharded first into a scratch file\n"
                    "beside the output (as `optstate unshard`; it needs the checkpoint's size in free space)",
                    /*rank_set=*/true);
  cmd->footer(
      "\nExamples:\n"
      "  optstate export consolidated.pt -o checkpoints/step_1000 --world-size 8\n"
      "  optstate export model_and_optim.pt -o dcp_dir --world-size 2 --json\n"
      "  optstate export fixed/rank0.optim.pt fixed/rank1.optim.pt -o dcp_optim --world-size 4\n"
      "Optimizer state keyed 0..N-1 comes out keyed \"0\"..\"N-1\" (DCP makes every key a str),\n"
      "as with torch's own torch_save_to_dcp: export FQN-keyed state (consolidate --to fqn, remap --to fqn).");
  return [o](CommandOutput& output) { return RunExport(*o, output); };
}

}  // namespace optstate::tools
