// `optstate unshard FILE... -o OUT`: the per-rank files of one sharded save
// (DTensor shards) as one torch.save file of whole tensors.
#include "commands.h"

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/inspect_report.h"
#include "optstate/unshard.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "unshard";

struct UnshardCommandOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
  bool json = false;
};

void DeclareFlags(CLI::App& cmd, UnshardCommandOptions& o) {
  AddCheckpointPaths(cmd, "inputs", o.inputs, "Every rank's file, in rank order (or named rank<N>)");
  AddOutputFileFlag(cmd, o.output);
  AddWriteFlags(cmd, o.no_sync, o.verify_crc);
  AddQuietFlag(cmd, o.quiet);
  AddJsonFlag(cmd, o.json, "unshard");
}

int RunUnshard(const UnshardCommandOptions& o, CommandOutput& output) {
  Status refused = RefuseInputAsOutput(o.inputs, o.output);
  if (!refused.ok()) return ReportError(output, kName, refused, o.json);
  UnshardOptions uo;
  uo.read.verify_crc = o.verify_crc;
  uo.write.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  if (!o.quiet && !o.json) uo.progress = PercentProgress(output.err, kName);
  auto r = UnshardRankFiles(o.inputs, o.output, uo);
  if (!r.ok()) return ReportError(output, kName, r.status(), o.json);
  if (o.json) {
    return WriteWrittenFileJson(output,
                                {{"inputs", r->files}, {"output", o.output}, {"dtensors", r->dtensors},
                                 {"plain_tensors", r->plain_tensors}, {"rank_local_tensors", r->rank_local},
                                 {"dtensor_bytes", r->dtensor_bytes}, {"steps_separated", r->steps_separated},
                                 {"largest_assembled_tensor_bytes", r->largest_assembled_bytes}},
                                r->write);
  }
  output.out << o.output << ": " << HumanBytes(r->write.bytes) << " from " << r->files.size() << " ranks\n";
  for (size_t i = 0; i < r->files.size(); ++i) output.out << "  rank " << i << "  " << r->files[i] << "\n";
  output.out << "  " << r->dtensors << " sharded tensors (DTensors, ShardedTensors) made whole ("
             << HumanBytes(r->dtensor_bytes) << "), " << r->plain_tensors << " other "
             << (r->plain_tensors == 1 ? "tensor" : "tensors") << " kept from rank 0\n";
  if (r->steps_separated > 0) {
    output.out << "  " << r->steps_separated << " optimizer state "
               << (r->steps_separated == 1 ? "entry was given a step tensor of its own"
                                           : "entries were given a step tensor each of their own")
               << ": "
               << "the rank files shared one among several entries (FSDP1's flat parameter), which torch.optim would "
               << "increment once per parameter\n";
  }
  if (!r->rank_local.empty()) {
    output.out << "  " << r->rank_local.size() << " plain tensors differ between ranks; rank 0's are kept, which "
               << "are not the whole of anything (per-rank values such as preconditioners of a local shard):\n";
    for (size_t i = 0; i < r->rank_local.size() && i < 8; ++i) output.out << "    " << r->rank_local[i] << "\n";
    if (r->rank_local.size() > 8) output.out << "    ... (" << r->rank_local.size() << " in all; --json lists them)\n";
  }
  output.out << "  torch.load(weights_only=True) " << WeightsOnlyVerdict(r->write) << "\n";
  return kExitOk;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Make the per-rank files of one FSDP2/TP save (DTensor shards) or FSDP1 sharded save\n"
    "(ShardedTensor blocks) one torch.save file of whole tensors, as one process would have saved it",
    "\nRank 0's file is the template: each DTensor becomes a tensor of its global shape, every rank's\n"
    "shard placed at the block its placements and its mesh coordinate (pickled in the file) give:\n"
    "Shard(d), Replicate(), FSDP2 + TP's _StridedShard, on meshes of any dims; a DTensor on a sub-mesh\n"
    "(FSDP2's dp mesh beside TP) is taken from the first rank holding each block. Scalars and plain\n"
    "tensors are rank 0's. Blocks of whole rows are copied straight from the inputs; memory is bounded\n"
    "by the largest tensor split along another dim. FSDP1's SHARDED_STATE_DICT (FSDP.optim_state_dict)\n"
    "keeps ShardedTensors, whose blocks name their offsets: each is placed there, and the blocks must\n"
    "cover the whole once.\n"
    "\nExit codes: 0 written; 2 could not do the job (nothing written).\n"
    "\nExamples:\n"
    "  optstate unshard rank0.optim.pt rank1.optim.pt -o optim.pt\n"
    "  optstate unshard fsdp1_sharded_rank0.pt fsdp1_sharded_rank1.pt -o whole.pt &&\n"
    "    optstate remap --to index whole.pt -o for_torch_optim.pt\n"
    "  optstate unshard ckpt/model_rank*.pt -o model.pt && optstate export model.pt -o dcp_dir\n"
    "  optstate remap r0.pt r1.pt --model m0.pt --model m1.pt --on-collision reset -o fixed/ &&\n"
    "    optstate unshard fixed/r0.pt fixed/r1.pt -o fixed.pt",
};

CommandRunner AddUnshardCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunUnshard);
}

}  // namespace optstate::tools
