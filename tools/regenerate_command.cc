// `optstate regenerate (--synthetic SIZE | --manifest M | --model F) -o OUT`:
// a realistic optimizer checkpoint (AdamW, Adam, SGD, Adagrad or RMSprop), in
// any key scheme, without Python.
#include "commands.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "optstate/checkpoint.h"
#include "optstate/inspect_report.h"
#include "optstate/optimizer.h"
#include "optstate/params.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "regenerate";

struct RegenerateCommandOptions {
  std::string output;
  std::string synthetic;   // a size: "4GiB"
  std::string manifest;
  std::string model;
  std::string model_key;
  std::string key_scheme = "index";
  std::string manifest_out;  // where to write the parameters with their data_ptr
  int threads = 0;
  std::string isa = "auto";
  bool no_sync = false;
  bool zstd = false;
  bool json = false;
  bool quiet = false;
  std::string optimizer = "adamw";
  RegenerateOptions run;
  // The numeric hyperparameter options: one not given takes the default of
  // the --optimizer chosen (torch's), not AdamW's.
  std::vector<std::pair<CLI::Option*, double OptimizerHyper::*>> numbers;
};

void DeclareFlags(CLI::App& cmd, RegenerateCommandOptions& o) {
  AddOutputFileFlag(cmd, o.output, "Output checkpoint (temporary file beside it, then renamed)");
  cmd.add_option("--synthetic", o.synthetic,
                 "A transformer-like model of this many bytes of float32 parameters (4GiB)");
  cmd.add_option("--manifest", o.manifest, "The parameters of a manifest (schemas/param-manifest.schema.json)");
  cmd.add_option("--model", o.model,
                 "The parameters of a model state_dict (or a checkpoint holding one),\n"
                 "starting from its weights");
  cmd.add_option("--model-key", o.model_key, "Where the model state_dict is in --model (default: find it)");
  cmd.add_option("--key-scheme", o.key_scheme, "How to key the state")
      ->check(CLI::IsMember({"index", "fqn", "string-index", "ptr-shape", "ptr-shape-fsdp"}))
      ->capture_default_str();
  cmd.add_option("--split-rows", o.run.split_rows, "ptr-shape: split parameters with more rows into views of N rows");
  cmd.add_flag("--with-model", o.run.with_model, "Save {'model': state_dict, 'optimizer': ...} in one file");
  cmd.add_option("--manifest-out", o.manifest_out, "Also write the parameters with the data_ptr their keys use");
  cmd.add_option("--optimizer", o.optimizer, "The torch.optim algorithm whose steps and state layout to write")
      ->check(CLI::IsMember({"adamw", "adam", "sgd", "adagrad", "rmsprop"}))
      ->capture_default_str();
  cmd.add_option("--steps", o.run.steps, "Optimizer steps")->capture_default_str();
  cmd.add_option("--seed", o.run.seed, "Seed of the synthetic values and gradients")->capture_default_str();
  // Defaults are torch's for the --optimizer chosen (applied in RunRegenerate).
  auto number = [&](const char* name, double OptimizerHyper::*field, const char* help) {
    o.numbers.emplace_back(cmd.add_option(name, o.run.hyper.*field, help), field);
  };
  number("--lr", &OptimizerHyper::lr, "Learning rate (default: torch's, 1e-3; Adagrad and RMSprop 1e-2)");
  number("--beta1", &OptimizerHyper::beta1, "Adam(W) (default 0.9)");
  number("--beta2", &OptimizerHyper::beta2, "Adam(W) (default 0.999)");
  number("--eps", &OptimizerHyper::eps, "Adam(W), Adagrad, RMSprop (default 1e-8; Adagrad 1e-10)");
  number("--weight-decay", &OptimizerHyper::weight_decay, "(default 0; AdamW 0.01)");
  number("--momentum", &OptimizerHyper::momentum, "SGD, RMSprop (default 0)");
  number("--dampening", &OptimizerHyper::dampening, "SGD (default 0)");
  number("--lr-decay", &OptimizerHyper::lr_decay, "Adagrad (default 0)");
  number("--initial-accumulator-value", &OptimizerHyper::initial_accumulator_value, "Adagrad (default 0)");
  number("--alpha", &OptimizerHyper::alpha, "RMSprop (default 0.99)");
  cmd.add_flag("--amsgrad", o.run.hyper.amsgrad, "Adam(W)");
  cmd.add_flag("--nesterov", o.run.hyper.nesterov, "SGD");
  cmd.add_flag("--centered", o.run.hyper.centered, "RMSprop");
  cmd.add_flag("--maximize", o.run.hyper.maximize);
  cmd.add_option("--threads", o.threads, "Threads for the fused kernel (default: all)");
  cmd.add_option("--isa", o.isa, "Fused kernel: auto (the best this CPU has), generic, avx2 or avx512")
      ->check(CLI::IsMember({"auto", "generic", "avx2", "avx512"}))
      ->capture_default_str();
  cmd.add_flag("--zstd", o.zstd, "Compress the output with zstd");
  cmd.add_flag("--no-sync", o.no_sync, "Skip the fsyncs (scratch outputs)");
  AddQuietFlag(cmd, o.quiet);
  AddJsonFlag(cmd, o.json, "regenerate");
}

// With --model, the model file stays open so that its weights are the starting values.
struct ModelSource {
  std::unique_ptr<CheckpointFile> file;
  std::vector<NodeId> tensors;  // per parameter
};

StatusOr<std::vector<ParamInfo>> LoadParams(const RegenerateCommandOptions& o, ModelSource& model) {
  int sources = !o.synthetic.empty() + !o.manifest.empty() + !o.model.empty();
  if (sources != 1) return InvalidArgumentError("give exactly one of --synthetic, --manifest and --model");
  if (!o.synthetic.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(uint64_t bytes, ParseSize(o.synthetic));
    return SyntheticParams(bytes);
  }
  if (!o.manifest.empty()) return ReadParamManifest(o.manifest);
  OPTSTATE_ASSIGN_OR_RETURN(model.file, OpenCheckpoint(o.model));
  const Checkpoint& cp = model.file->checkpoint();
  std::string found_at;
  StatusOr<NodeId> dict = LocateModelStateDict(cp, o.model_key, &found_at);
  if (!dict.ok()) return std::move(dict).status().WithContext(o.model);
  std::vector<ParamInfo> params = ParamsOfModel(cp, *dict).params;
  for (ParamInfo& p : params) {
    model.tensors.push_back(DictLookup(cp.graph, *dict, p.name));
    // A rank's DTensor shard: the state is regenerated for the values this file holds.
    if (!p.local_shape().empty()) {
      p.shape = p.local_shape();
      uint64_t n = 1;
      for (int64_t d : p.shape) n *= static_cast<uint64_t>(d);
      p.nbytes = n * GetDTypeInfo(p.dtype).element_size;
      p.shard().local_shape.clear();
      p.shard().placements.clear();
    }
  }
  return params;
}

// Exit 0 written; 2 could not do the job.
int RunRegenerate(const RegenerateCommandOptions& o, CommandOutput& output) {
  ModelSource model;
  auto params = LoadParams(o, model);
  if (!params.ok()) return ReportError(output, kName, params.status(), o.json);
  std::optional<KeyScheme> scheme = KeySchemeFromName(o.key_scheme);
  RegenerateOptions run = o.run;
  if (model.file) {
    run.initial_values = [&model](size_t i) -> StatusOr<std::vector<float>> {
      const Checkpoint& cp = model.file->checkpoint();
      StatusOr<std::vector<float>> v =
          ReadTensorAsFloat(model.file->bytes(), cp, cp.tensors[cp.graph.at(model.tensors[i]).tensor]);
      if (!v.ok()) return std::move(v).status().WithContext(model.file->path());
      return v;
    };
  }
  run.scheme = *scheme;  // CLI11 checked the names
  run.algorithm = *AlgorithmFromName(o.optimizer);
  const OptimizerHyper defaults = OptimizerHyper::Defaults(run.algorithm);
  for (const auto& [option, field] : o.numbers) {
    if (option->count() == 0) run.hyper.*field = defaults.*field;
  }
  run.kernel.threads = o.threads;
  run.kernel.isa = o.isa == "generic" ? Isa::kGeneric : o.isa == "avx2" ? Isa::kAvx2 : o.isa == "avx512" ? Isa::kAvx512 : Isa::kAuto;
  run.write.zstd = o.zstd;
  run.write.durability = o.no_sync ? Durability::kUnsynced : Durability::kSynced;
  auto started = std::chrono::steady_clock::now();
  if (!o.quiet && !o.json) run.progress = PercentProgress(output.err, kName);
  auto report = Regenerate(*params, run, o.output);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.output), o.json);
  if (!o.manifest_out.empty()) {
    Status s = WriteFileAtomically(o.manifest_out, ParamManifestText(report->manifest));
    if (!s.ok()) return ReportError(output, kName, s, o.json);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (o.json) {
    WriteJson(output, {{"output", o.output}, {"key_scheme", o.key_scheme}, {"params", report->params},
                       {"state_entries", report->state_entries}, {"param_bytes", report->param_bytes},
                       {"state_bytes", report->state_bytes}, {"optimizer", o.optimizer}, {"steps", run.steps}, {"seed", run.seed},
                       {"with_model", run.with_model}, {"bytes", report->write.bytes},
                       {"isa", IsaName(run.kernel.isa == Isa::kAuto ? DetectIsa() : run.kernel.isa)}});
    return kExitOk;
  }
  output.out << o.output << ": " << HumanBytes(report->write.bytes) << "; " << report->params << " parameters ("
             << HumanBytes(report->param_bytes) << "), " << report->state_entries << " state entries keyed "
             << o.key_scheme << ", " << run.steps << " " << o.optimizer << " steps, seed " << run.seed << "\n";
  if (!o.quiet) output.err << "optstate regenerate: done in " << static_cast<int>(seconds * 10) / 10.0 << " s\n";
  return kExitOk;
}

}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Write a realistic optimizer checkpoint: K fused steps of torch.optim's AdamW (or Adam, SGD,\n"
    "Adagrad, RMSprop) with seeded synthetic gradients, laid out as torch saves that class and\n"
    "keyed the way you choose (including HeavyBall's broken layouts)",
    "\nExit codes: 0 written; 2 could not do the job.\n"
    "\nExamples:\n"
    "  optstate regenerate --synthetic 4GiB -o big.pt\n"
    "  optstate regenerate --model model.pt --optimizer sgd --momentum 0.9 --nesterov --with-model -o sgd.pt\n"
    "  optstate regenerate --synthetic 64MiB --key-scheme ptr-shape --split-rows 256 --manifest-out params.json -o hb.pt\n"
    "  optstate regenerate --model model.pt --key-scheme ptr-shape-fsdp --with-model -o fsdp_bug.pt",
};

CommandRunner AddRegenerateCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunRegenerate);
}

}  // namespace optstate::tools
