#include "export_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp_export.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "export";

}  // namespace

int RunExport(const DcpOutputFlags& o, CommandOutput& output) {
  std::unique_ptr<CheckpointFile> file;
  auto open = [&]() -> Status {
    ReadOptions read;
    read.verify_crc = o.verify_crc;
    OPTSTATE_ASSIGN_OR_RETURN(file, OpenCheckpoint(o.input, read));
    for (const Finding& f : file->checkpoint().findings) {
      if (f.severity == Severity::kError) {
        return UnsupportedError(o.input + ": " + f.where + ": " + f.message + " Nothing was written.");
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
  AddDcpOutputFlags(*cmd, *o, "torch.save file (.pt), legacy format, or .zst");
  cmd->footer(
      "\nExamples:\n"
      "  optstate export consolidated.pt -o checkpoints/step_1000 --world-size 8\n"
      "  optstate export model_and_optim.pt -o dcp_dir --world-size 2 --json\n"
      "Optimizer state keyed 0..N-1 comes out keyed \"0\"..\"N-1\" (DCP makes every key a str),\n"
      "as with torch's own torch_save_to_dcp: export FQN-keyed state (consolidate --to fqn, remap --to fqn).");
  return [o](CommandOutput& output) { return RunExport(*o, output); };
}

}  // namespace optstate::tools
