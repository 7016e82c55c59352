// `optstate consolidate DIR -o FILE`: a DCP checkpoint directory as one
// torch.save file, equal to what torch's dcp_to_torch_save writes (--to fqn,
// the default), or with optimizer state keyed 0..N-1 in param_groups order so
// that torch.optim's load_state_dict takes it directly (--to index).
#include "commands.h"

#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "distributed_job.h"
#include "optstate/dcp.h"
#include "optstate/inspect_report.h"
#include "optstate/validate.h"
#include "optstate/zero.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "consolidate";

struct ConsolidateCommandOptions {
  std::string input;
  std::string output;
  std::string to = "fqn";
  bool json = false;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
  bool distributed = false;
};

void DeclareFlags(CLI::App& cmd, ConsolidateCommandOptions& o) {
  cmd.add_option("input", o.input,
                 "DCP checkpoint directory (holding .metadata and *.distcp), or a DeepSpeed ZeRO directory\n"
                 "(global_stepN/, or the save_dir whose latest file names it): the fp32 master weights as\n"
                 "'model' (what zero_to_fp32 gives) and the optimizer state per parameter as 'optimizer'")
      ->required();
  AddOutputFileFlag(cmd, o.output);
  cmd.add_option("--to", o.to,
                 "fqn: optimizer state keyed by parameter name, as dcp_to_torch_save (default);\n"
                 "index: keyed 0..N-1 in param_groups order, loadable by torch.optim directly")
      ->check(CLI::IsMember({"fqn", "index"}));
  AddWriteFlags(cmd, o.no_sync, o.verify_crc);
  AddQuietFlag(cmd, o.quiet);
  cmd.add_flag("--distributed", o.distributed,
               "Share the work with the other processes of a torchrun or srun job (RANK/WORLD_SIZE or\n"
               "SLURM_PROCID/SLURM_NTASKS, MASTER_ADDR/MASTER_PORT): each writes its share of the tensors\n"
               "into the one output file, which they all see; rank 0 writes the rest and renames it\n"
               "into place. The same bytes as one process writes");
  AddJsonFlag(cmd, o.json, "consolidate");
}

// The JSON report (schemas/consolidate.schema.json).
void WriteConsolidatedJson(CommandOutput& output, nlohmann::ordered_json doc, const WriteReport& written,
                           const std::string& unconfirmed) {
  if (!unconfirmed.empty()) doc["unconfirmed"] = unconfirmed;
  WriteWrittenFileJson(output, std::move(doc), written);
}

// One process of a --distributed job reports; the others only say when they
// did not hear that the file was committed.
bool Reports(const Coordinator* co) { return !co || co->rank() == 0; }

void NoteUnconfirmed(CommandOutput& output, const std::string& file, const std::string& unconfirmed) {
  if (unconfirmed.empty()) return;
  output.err << "note: " << file << " is complete (every process wrote its part, then the central directory was "
             << "written and the file renamed into place), but not every process heard so: " << unconfirmed << "\n";
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A DeepSpeed ZeRO directory: the fp32 master weights and the optimizer state
// per parameter, from the rank partitions.
Status RunConsolidateZero(const ConsolidateCommandOptions& o, const ZeroCheckpoint& z, Coordinator* co,
                          CommandOutput& output) {
  ZeroConsolidateOptions zo;
  zo.keys = o.to == "index" ? ZeroStateKeys::kIndex : ZeroStateKeys::kFqn;
  zo.write.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  zo.coordinator = co;
  if (!o.quiet && !o.json && Reports(co)) zo.progress = PercentProgress(output.err, kName);
  auto report = ConsolidateZero(z, o.output, zo);
  if (!report.ok()) return std::move(report).status().WithContext(o.output);
  if (!o.json || !Reports(co)) NoteUnconfirmed(output, o.output, report->unconfirmed);
  if (!Reports(co)) return Status();
  if (o.json) {
    WriteConsolidatedJson(output,
                                {{"input", o.input}, {"output", o.output}, {"keys", o.to},
                                 {"format", "deepspeed-zero"}, {"zero_stage", z.stage}, {"world_size", z.world_size},
                                 {"trainable_params", report->trainable}, {"frozen_params", report->frozen},
                                 {"frozen_params_not_listed", report->unlisted_frozen}, {"buffers", report->buffers},
                                 {"shared_params", report->shared}, {"state_entries", report->state_entries},
                                 {"state_fields", report->state_fields}, {"pieces", report->pieces},
                                 {"tensor_bytes", report->tensor_bytes}},
                                report->write, report->unconfirmed);
    return Status();
  }
  output.out << o.output << ": " << HumanBytes(report->write.bytes) << " from " << o.input << " (DeepSpeed ZeRO-"
             << z.stage << (z.bf16_optimizer ? ", BF16_Optimizer" : "") << ", " << z.world_size << " ranks)\n"
             << "  model: " << report->trainable << " parameters as fp32 master weights"
             << (z.bf16_optimizer ? " (zero_to_fp32 refuses BF16_Optimizer files), " : " (what zero_to_fp32 gives), ")
             << report->frozen << " frozen, " << report->buffers << " buffers, " << report->shared << " tied\n"
             << (report->unlisted_frozen.empty() ? std::string()
                                                 : "  frozen, not in the model states' lists (kept from its module "
                                                   "entry; zero_to_fp32 leaves them out): " +
                                                       Joined(report->unlisted_frozen) + "\n")
             << "  optimizer: " << report->state_entries << " state entries ("
             << (report->state_fields.empty() ? std::string("no fields") : Joined(report->state_fields)) << ") in "
             << z.groups.size() << " param groups, keyed by " << (o.to == "index" ? "index" : "name") << "; "
             << report->pieces << " partition ranges copied\n"
             << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(report->write) << "\n";
  return Status();
}

Status RunConsolidateDcp(const ConsolidateCommandOptions& o, const DcpCheckpoint& dcp, Coordinator* job,
                         CommandOutput& output) {
  ConsolidateOptions co;
  co.keys = o.to == "index" ? ConsolidateKeys::kIndex : ConsolidateKeys::kFqn;
  co.read.verify_crc = o.verify_crc;
  co.write.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  co.coordinator = job;
  if (!o.quiet && !o.json && Reports(job)) co.progress = PercentProgress(output.err, kName);
  auto report = ConsolidateDcp(dcp, o.output, co);
  if (!report.ok()) return std::move(report).status().WithContext(o.output);
  if (!o.json || !Reports(job)) NoteUnconfirmed(output, o.output, report->unconfirmed);
  if (!Reports(job)) return Status();
  if (o.json) {
    WriteConsolidatedJson(output,
                                {{"input", o.input}, {"output", o.output}, {"keys", o.to},
                                 {"tensors", report->tensors}, {"chunks", report->chunks},
                                 {"bytes_items", report->bytes_items}, {"tensor_bytes", report->tensor_bytes},
                                 {"largest_assembled_tensor_bytes", report->largest_tensor_bytes},
                                 {"optimizer_states_rekeyed", report->optimizer_states},
                                 {"unlisted_state", report->unlisted_state},
                                 {"unflattened_optimizers", report->unflattened}},
                                report->write, report->unconfirmed);
    return Status();
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
  return Status();
}

int RunConsolidate(const ConsolidateCommandOptions& o, CommandOutput& output) {
  DistributedJob job{o.distributed, std::string(kName) + ":" + o.output, kName, o.json};
  std::error_code ec;
  if (std::filesystem::is_directory(o.input, ec) && !IsDcpDirectory(o.input)) {
    auto fd = FindFrameworkFiles(o.input);
    if (fd.ok() && fd->layout == "deepspeed") {
      std::unique_ptr<ZeroCheckpoint> zero;
      auto open = [&]() -> Status {
        ReadOptions read;
        read.verify_crc = o.verify_crc;
        OPTSTATE_ASSIGN_OR_RETURN(zero, OpenZeroCheckpoint(fd->TagDirectory(o.input), read));
        return Status();
      };
      return RunJob(job, output, open, [&](Coordinator* co) { return RunConsolidateZero(o, *zero, co, output); });
    }
  }
  std::unique_ptr<DcpCheckpoint> dcp;
  auto open = [&]() -> Status {
    OPTSTATE_ASSIGN_OR_RETURN(dcp, OpenDcpCheckpoint(o.input));
    return Status();
  };
  return RunJob(job, output, open, [&](Coordinator* co) { return RunConsolidateDcp(o, *dcp, co, output); });
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Turn a DCP checkpoint directory (what torch's dcp_to_torch_save writes) or a DeepSpeed ZeRO\n"
    "1/2/3 directory into one torch.save file, tensor by tensor, without loading it into memory",
    "\nExamples:\n"
    "  optstate consolidate checkpoints/step_1000 -o step_1000.pt\n"
    "  optstate consolidate checkpoints/step_1000 -o step_1000_optim.pt --to index --json\n"
    "  optstate consolidate ds_out/global_step3 -o step3.pt --to index      (DeepSpeed ZeRO, any stage)\n"
    "  optstate consolidate ds_out -o step3.pt                               (the tag its latest file names)\n"
    "  torchrun --no-python --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node0:29400 \\\n"
    "      optstate consolidate --distributed /shared/ckpt -o /shared/step_1000.pt",
};

CommandRunner AddConsolidateCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunConsolidate);
}

}  // namespace optstate::tools
