#include "dcp_output.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "cli_layout.h"
#include "distributed_job.h"
#include "optstate/file_io.h"
#include "optstate/inspect_report.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

// What was written: text, or JSON (schemas/dcp-write.schema.json).
void WriteReport(CommandOutput& output, const DcpOutputFlags& f, const DcpWriteReport& r) {
  const std::string& dir = f.output;
  const int world_size = f.world_size;
  if (f.json) {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (size_t rank = 0; rank < r.file_bytes.size(); ++rank) {
      files.push_back({{"name", "__" + std::to_string(rank) + "_0.distcp"}, {"bytes", r.file_bytes[rank]}});
    }
    nlohmann::ordered_json j = {{"input", f.input}};
    if (f.inputs.size() > 1) j["inputs"] = f.inputs;  // a rank set, unsharded first
    j.update(nlohmann::ordered_json{{"output", dir}, {"world_size", world_size}, {"tensors", r.tensors},
                                    {"chunks", r.chunks}, {"bytes_items", r.bytes_items},
                                    {"tensor_bytes", r.tensor_bytes}, {"largest_chunk_bytes", r.largest_chunk_bytes},
                                    {"metadata_bytes", r.metadata_bytes}, {"files", files},
                                    {"leftovers", r.leftovers}});
    if (!r.unconfirmed.empty()) j["unconfirmed"] = r.unconfirmed;
    if (!f.rekeyed.is_null()) j["optimizer_keys"] = f.rekeyed;
    WriteJson(output, j);
    return;
  }
  uint64_t total = r.metadata_bytes;
  for (uint64_t b : r.file_bytes) total += b;
  output.out << dir << ": DCP checkpoint for " << world_size << (world_size == 1 ? " rank, " : " ranks, ")
             << HumanBytes(total) << " from "
             << (f.inputs.size() > 1 ? "rank set of " + std::to_string(f.inputs.size()) + " files (" + f.inputs.front() +
                                           " ... " + f.inputs.back() + "), unsharded first"
                                     : f.input)
             << "\n"
             << "  " << r.tensors << " tensors (" << HumanBytes(r.tensor_bytes) << ") in " << r.chunks << " chunks, "
             << r.bytes_items << " other values; "
             << (r.largest_chunk_bytes == 0 ? std::string("every chunk copied straight from its input")
                                            : "largest chunk through memory " + HumanBytes(r.largest_chunk_bytes))
             << "\n";
  if (!f.rekeyed_text.empty()) output.out << "  " << f.rekeyed_text << "\n";
  for (size_t rank = 0; rank < r.file_bytes.size(); ++rank) {
    output.out << "  __" << rank << "_0.distcp  " << HumanBytes(r.file_bytes[rank]) << "\n";
  }
  for (const std::string& left : r.leftovers) {
    output.err << "note: " << left << " was left by an interrupted run writing " << dir
               << "; remove it to free its space\n";
  }
  if (!r.unconfirmed.empty()) {
    output.err << "note: " << dir << " is complete (every process wrote its part, then .metadata was written and "
               << "the directory renamed into place), but not every process heard so: " << r.unconfirmed << "\n";
  }
}

}  // namespace

void AddDcpOutputFlags(CLI::App& cmd, DcpOutputFlags& f, const std::string& input_help, bool rank_set) {
  if (rank_set) {
    cmd.add_option("inputs", f.inputs, input_help)->required();
  } else {
    cmd.add_option("input", f.input, input_help)->required();
  }
  cmd.add_option("-o,--output", f.output, "New directory; written beside it under a temporary name, then renamed")
      ->required();
  cmd.add_option("--world-size", f.world_size, "Ranks of the output: one __<rank>_0.distcp file each")
      ->required()
      ->check(IntegerRange(1, 65536));
  AddWriteFlags(cmd, f.no_sync, f.verify_crc);
  AddQuietFlag(cmd, f.quiet);
  cmd.add_flag("--distributed", f.distributed,
               "Share the work with the other processes of a torchrun or srun job (RANK/WORLD_SIZE or\n"
               "SLURM_PROCID/SLURM_NTASKS, MASTER_ADDR/MASTER_PORT): each writes its ranks' files\n"
               "into an output directory they all see; rank 0 writes .metadata last");
  AddJsonFlag(cmd, f.json, "dcp-write");
}

int RunDcpOutput(const DcpOutputFlags& f, std::string_view command, CommandOutput& output,
                 const std::function<Status()>& open,
                 const std::function<StatusOr<DcpWriteReport>(const DcpWriteOptions&, Coordinator*)>& write) {
  DistributedJob job{f.distributed, std::string(command) + ":" + f.output, command, f.json};
  return RunJob(job, output, open, [&](Coordinator* coordinator) -> Status {
    DcpWriteOptions wo;
    wo.world_size = f.world_size;
    wo.durability = f.no_sync ? Durability::kUnsynced : Durability::kSynced;
    bool reports = !coordinator || coordinator->rank() == 0;  // one report per job
    if (!f.quiet && !f.json && reports) wo.progress = PercentProgress(output.err, command);
    auto report = write(wo, coordinator);
    if (!report.ok()) return report.status();
    if (reports) {
      WriteReport(output, f, *report);
    } else if (!report->unconfirmed.empty()) {
      output.err << "note: " << f.output << " is complete, but this process did not hear so: " << report->unconfirmed
                 << "\n";
    }
    return Status();
  });
}

}  // namespace optstate::tools
