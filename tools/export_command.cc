// `optstate export FILE -o DIR --world-size M`: a torch.save file as a DCP
// checkpoint of M ranks, flattened as DCP flattens a state dict, so that
// dcp.load (e.g. into an FSDP2 model of world size M) takes it.
#include "commands.h"

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "dcp_output.h"
#include "optstate/collisions.h"
#include "optstate/dcp.h"
#include "optstate/params.h"
#include "optstate/unshard.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "export";

struct ExportFlags : DcpOutputFlags {
  std::string keys = "auto";  // auto | fqn | index: what index-keyed optimizer state becomes
  ParamSource params;         // where the FQNs come from
  std::string state_key;
};

void DeclareFlags(CLI::App& cmd, ExportFlags& o) {
  AddDcpOutputFlags(cmd, o,
                    "torch.save file (.pt), legacy format, or .zst; or every rank's file of one FSDP2/TP save\n"
                    "(DTensor shards, in rank order or named rank<N>), unsharded first into a scratch file\n"
                    "beside the output (as `optstate unshard`; it needs the checkpoint's size in free space)",
                    /*rank_set=*/true);
  cmd.add_option("--keys", o.keys,
                 "What optimizer state keyed by index becomes. fqn: the names torch's\n"
                 "get/set_optimizer_state_dict use (from the file's model, --model or --manifest);\n"
                 "index: kept, as torch_save_to_dcp does (loads only into a bare optimizer.state_dict());\n"
                 "auto (default): fqn, refused when the names are not known. Other keys are kept")
      ->check(CLI::IsMember({"auto", "fqn", "index"}));
  AddParamSourceFlags(cmd, o.params);
  AddStateKeyFlag(cmd, o.state_key, "Where the optimizer state dict is (default: every one found)");
}

bool IndexKeyed(KeyKind k) { return k == KeyKind::kIndex || k == KeyKind::kStringIndex; }

constexpr const char* kOrIndex =
    "; or --keys index to write the indices as torch_save_to_dcp does (loadable only into a bare "
    "optimizer.state_dict(), not through get/set_optimizer_state_dict).";

// torch's get/set_optimizer_state_dict (what FSDP2 and torchtitan load through)
// key the optimizer's state by FQN; a DCP checkpoint keyed "0".."N-1" loads only
// into a bare optimizer.state_dict(). So index keys are written as FQNs when the
// names are known, and refused when they are not, unless --keys index asks for
// torch_save_to_dcp's behaviour. Rekeys the index-keyed state at `path` of
// `owned`; on success `matched` holds the remapped file.
Status RekeyOneToFqn(ExportFlags& o, std::unique_ptr<CheckpointFile> owned, const std::string& path, KeyKind scheme,
                     std::unique_ptr<MatchedState>& matched) {
  const std::string keep = " Nothing was written.";
  const std::string shown = path.empty() ? "(root)" : "'" + path + "'";
  const std::string where = o.input + ": optimizer state at " + shown + " is keyed by index";
  auto m = MatchCheckpoint(std::move(owned), path, o.params, ReadOptions{}, MatchOptions{});
  if (!m.ok()) {
    return InvalidArgumentError(where + ", and get/set_optimizer_state_dict expect FQNs, but the names are not known (" +
                                std::string(m.status().message()) + "): give --model or --manifest" + kOrIndex + keep);
  }
  if (!m->order_ambiguous.empty()) {
    const std::string list = FirstNames(m->order_ambiguous);
    return InvalidArgumentError(where + ", and FQN keys need each index's parameter, but " + m->order + ": " + list +
                                "; give --manifest (the training script's order)" + kOrIndex + keep);
  }
  RemapOptions ro;
  ro.to = KeyTarget::kFqn;
  auto remapped = RemapState(std::move(m->file->checkpoint()), m->state, m->params, m->match, ro);
  if (!remapped.ok()) return std::move(remapped).status().WithContext(o.input);
  for (const RemapEntry& e : remapped->entries) {
    if (e.fate == "dropped") {
      return InvalidArgumentError(where + ": entry " + e.input_key + " has no parameter (" + e.reason + ")" + kOrIndex +
                                  keep);
    }
  }
  o.rekeyed.push_back({{"state_path", path}, {"from", std::string(KeyKindName(scheme))}, {"to", "fqn"},
                       {"params_from", m->params_from}, {"entries", remapped->moved}});
  o.rekeyed_text += std::string(o.rekeyed_text.empty() ? "" : "\n  ") + "optimizer state at " + shown + ": " +
                    std::to_string(remapped->moved) + " index keys written as FQNs (parameters from " +
                    m->params_from + ")";
  matched = std::make_unique<MatchedState>(std::move(*m));
  matched->file->checkpoint() = std::move(remapped->checkpoint);
  // The model beside it is keyed as DSD keys it too (DDP's module., compile's
  // _orig_mod. dropped), or dcp.load finds the optimizer's names and not the model's.
  if (!matched->model_file && matched->model_dict != kNoNode) {
    size_t renamed = RenameToCanonicalFqns(matched->file->checkpoint(), matched->model_dict);
    if (renamed > 0) {
      o.rekeyed_text += "\n  model entries: " + std::to_string(renamed) +
                        " renamed as DSD names them (wrapper prefixes such as DDP's module. dropped)";
    }
  }
  return Status();
}

// Every index-keyed optimizer state in the file (or the one --state-key names) is
// rekeyed, one after another on the remapped file: a GAN's or a multi-optimizer
// run's states all load through DSD afterwards. On success `file` is the result.
Status RekeyToFqn(ExportFlags& o, std::unique_ptr<CheckpointFile>& own, std::unique_ptr<MatchedState>& matched,
                  const CheckpointFile*& file) {
  if (o.keys == "index") return Status();
  std::vector<std::string> paths;
  if (!o.state_key.empty()) {
    paths.push_back(o.state_key);
  } else {
    for (const std::string& path : FindOptimizerStates(own->checkpoint())) {
      auto st = ReadOptimizerState(own->checkpoint(), path);
      if (st.ok() && !st->keys.empty() && IndexKeyed(st->scheme)) paths.push_back(path);
    }
  }
  for (const std::string& path : paths) {
    const CheckpointFile& current = matched ? *matched->file : *own;
    auto st = ReadOptimizerState(current.checkpoint(), path);
    if (!st.ok()) return st.status().WithContext(o.input);
    if (!IndexKeyed(st->scheme)) {
      if (o.keys == "fqn" && st->scheme != KeyKind::kFqn) {
        return InvalidArgumentError(o.input + ": optimizer state at '" + path + "' is keyed by " +
                                    std::string(KeyKindName(st->scheme)) +
                                    ": remap it first (optstate remap --to fqn). Nothing was written.");
      }
      continue;
    }
    std::unique_ptr<MatchedState> next;
    OPTSTATE_RETURN_IF_ERROR(
        RekeyOneToFqn(o, matched ? std::move(matched->file) : std::move(own), path, st->scheme, next));
    matched = std::move(next);
  }
  if (matched) file = matched->file.get();
  return Status();
}

int RunExport(ExportFlags o, CommandOutput& output) {
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
  std::unique_ptr<MatchedState> matched;
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
    if (!rank_set) OPTSTATE_RETURN_IF_ERROR(RekeyToFqn(o, own, matched, file));
    return Status();
  };
  auto write = [&](const DcpWriteOptions& wo, Coordinator* coordinator) {
    return ExportToDcp(*file, o.output, wo, coordinator);
  };
  return RunDcpOutput(o, kName, output, open, write);
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Write a torch.save file as a DCP checkpoint of M ranks (what torch_save_to_dcp does,\n"
    "sharded on dim 0 like FSDP2), for dcp.load into a sharded model",
    "\nExamples:\n"
    "  optstate export consolidated.pt -o checkpoints/step_1000 --world-size 8\n"
    "  optstate export model_and_optim.pt -o dcp_dir --world-size 2 --json\n"
    "  optstate export fixed/rank0.optim.pt fixed/rank1.optim.pt -o dcp_optim --world-size 4\n"
    "  optstate export optimizer.bin --model model.safetensors -o dcp_dir --world-size 2\n"
    "  optstate export plain_optimizer.pt --keys index -o dcp_dir --world-size 1\n"
    "Optimizer state keyed by index is written keyed by FQN (optimizer.state.<fqn>.exp_avg), the layout\n"
    "torch's get_optimizer_state_dict gives and dcp.load fills: the names come from the file's 'model'\n"
    "entry, --model or --manifest, with DDP/compile/FSDP wrapper prefixes dropped as DSD drops them.",
};

CommandRunner AddExportCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunExport);
}

}  // namespace optstate::tools
