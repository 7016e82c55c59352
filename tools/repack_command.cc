#include "repack_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint_writer.h"
#include "optstate/inspect_report.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "repack";


}  // namespace

int RunRepack(const RepackOptions& o, CommandOutput& output) {
  Status refused = RefuseInputAsOutput({o.input}, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  auto file = OpenCheckpoint(o.input, o.read);
  if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
  WriteOptions wo;
  wo.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  auto report = WriteCheckpoint(**file, (*file)->checkpoint().graph.root, o.output, wo);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.output), o.json);
  if (o.json) {
    nlohmann::ordered_json doc = {{"input", o.input},
                                  {"output", o.output},
                                  {"bytes", report->bytes},
                                  {"storages", report->storages},
                                  {"storage_bytes", report->storage_bytes},
                                  {"weights_only_loadable", report->unsafe_globals.empty()},
                                  {"unsafe_globals", report->unsafe_globals},
                                  {"loadable_after_dtensor_import", report->loadable_after_dtensor_import}};
    WriteJson(output, doc);
    return kExitOk;
  }
  output.out << o.output << ": " << HumanBytes(report->bytes) << ", " << report->storages << " storages ("
             << HumanBytes(report->storage_bytes) << ")\n";
  output.out << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(*report) << "\n";
  return kExitOk;
}

CommandRunner AddRepackCommand(CLI::App& parent) {
  auto o = std::make_shared<RepackOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Rewrite a checkpoint as a canonical torch.save zip through optstate's own writer\n"
             "(legacy format and .zst in, zip out; shared storages stay shared)");
  cmd->add_option("input", o->input, "torch.save file, legacy format, or .zst")->required();
  cmd->add_option("-o,--output", o->output, "Output file; written to a temporary file beside it, then renamed")
      ->required();
  AddWriteFlags(*cmd, o->no_sync, o->read.verify_crc);
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/repack.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate repack old_legacy_format.pt -o checkpoint.pt\n"
      "  optstate repack checkpoint.pt.zst -o checkpoint.pt --json");
  return [o](CommandOutput& output) { return RunRepack(*o, output); };
}

}  // namespace optstate::tools
