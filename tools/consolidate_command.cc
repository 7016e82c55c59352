#include "consolidate_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/dcp_consolidate.h"
#include "optstate/inspect_report.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "consolidate";

}  // namespace

int RunConsolidate(const ConsolidateCommandOptions& o, CommandOutput& output) {
  auto dcp = OpenDcpCheckpoint(o.input);
  if (!dcp.ok()) return ReportError(output, kName, dcp.status(), o.json);
  ConsolidateOptions co;
  co.keys = o.to == "index" ? ConsolidateKeys::kIndex : ConsolidateKeys::kFqn;
  co.read.verify_crc = o.verify_crc;
  co.write.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  if (!o.quiet && !o.json) co.progress = PercentProgress(output.err, kName);
  auto report = ConsolidateDcp(**dcp, o.output, co);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.output), o.json);
  if (o.json) {
    WriteJson(output, {{"input", o.input},
                       {"output", o.output},
                       {"keys", o.to},
                       {"tensors", report->tensors},
                       {"chunks", report->chunks},
                       {"bytes_items", report->bytes_items},
                       {"tensor_bytes", report->tensor_bytes},
                       {"largest_assembled_tensor_bytes", report->largest_tensor_bytes},
                       {"optimizer_states_rekeyed", report->optimizer_states},
                       {"unlisted_state", report->unlisted_state},
                       {"unflattened_optimizers", report->unflattened},
                       {"bytes", report->write.bytes},
                       {"weights_only_loadable", report->write.unsafe_globals.empty()},
                       {"unsafe_globals", report->write.unsafe_globals}});
    return kExitOk;
  }
  output.out << o.output << ": " << HumanBytes(report->write.bytes) << " from " << o.input << "\n"
             << "  " << report->tensors << " tensors (" << HumanBytes(report->tensor_bytes) << ") from "
             << report->chunks << " chunks, " << report->bytes_items << " other values\n";
  for (const std::string& path : report->unflattened) {
    output.out << "  optimizer at " << (path.empty() ? "(root)" : "'" + path + "'")
               << " was saved flattened (state.<fqn>.<field>, as torchtitan saves it): written as {state, "
                  "param_groups}\n";
  }
  if (co.keys == ConsolidateKeys::kIndex) {
    output.out << "  optimizer state keyed by index in " << report->optimizer_states << " optimizer state dict(s)\n";
    for (const std::string& s : report->unlisted_state) {
      output.out << "  kept by name (no param_group lists it): " << s << "\n";
    }
  }
  output.out << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(report->write) << "\n";
  return kExitOk;
}

CommandRunner AddConsolidateCommand(CLI::App& parent) {
  auto o = std::make_shared<ConsolidateCommandOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Turn a DCP checkpoint directory into one torch.save file (what torch's dcp_to_torch_save\n"
             "writes), tensor by tensor, without loading the checkpoint into memory");
  cmd->add_option("input", o->input, "DCP checkpoint directory (holding .metadata and *.distcp)")->required();
  cmd->add_option("-o,--output", o->output, "Output file; written to a temporary file beside it, then renamed")
      ->required();
  cmd->add_option("--to", o->to,
                  "fqn: optimizer state keyed by parameter name, as dcp_to_torch_save (default);\n"
                  "index: keyed 0..N-1 in param_groups order, loadable by torch.optim directly")
      ->check(CLI::IsMember({"fqn", "index"}));
  AddWriteFlags(*cmd, o->no_sync, o->verify_crc);
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/consolidate.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate consolidate checkpoints/step_1000 -o step_1000.pt\n"
      "  optstate consolidate checkpoints/step_1000 -o step_1000_optim.pt --to index --json");
  return [o](CommandOutput& output) { return RunConsolidate(*o, output); };
}

}  // namespace optstate::tools
