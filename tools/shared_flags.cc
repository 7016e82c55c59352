#include "shared_flags.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "cli_layout.h"
#include "optstate/inspect_report.h"

namespace optstate::tools {

StatusOr<RankSetMatch> OpenAndMatchRankSet(const StateInputs& in) {
  RankSetSource source{in.paths, in.models, in.params.manifest, in.params.model_key};
  return optstate::OpenAndMatchRankSet(source, in.state_key, in.read, in.match);
}

void AddParamSourceFlags(CLI::App& cmd, ParamSource& source) {
  CLI::Option* manifest =
      cmd.add_option("--manifest", source.manifest,
                     "Parameters in optimizer order, with data_ptr for pointer keys\n"
                     "(schemas/param-manifest.schema.json; the README shows how to write one)");
  CLI::Option* model = cmd.add_option(
      "--model", source.model,
      "A model state_dict file (or a checkpoint holding one) to take the parameters from.\n"
      "Without --manifest or --model, the checkpoint's own 'model' entry is used");
  cmd.add_option("--model-key", source.model_key,
                 "Where the model state_dict is in that file (default: the root, or its 'model',\n"
                 "'model_state_dict' or 'state_dict' entry)");
  manifest->excludes(model);
}

void AddParamSourceFlags(CLI::App& cmd, ParamSource& source, std::vector<std::string>& rank_models) {
  CLI::Option* manifest =
      cmd.add_option("--manifest", source.manifest,
                     "Parameters in optimizer order, with data_ptr for pointer keys\n"
                     "(schemas/param-manifest.schema.json; the README shows how to write one)");
  CLI::Option* model = cmd.add_option(
      "--model", rank_models,
      "A model state_dict file (or a checkpoint holding one) to take the parameters from;\n"
      "repeat it once per rank, in rank order (or named rank<N>), for a sharded save.\n"
      "Without --manifest or --model, the checkpoint's own 'model' entry is used");
  // One file per occurrence, so `--model m.pt ckpt.pt` leaves ckpt.pt positional.
  model->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--model-key", source.model_key,
                 "Where the model state_dict is in that file (default: the root, or its 'model',\n"
                 "'model_state_dict' or 'state_dict' entry)");
  manifest->excludes(model);
  cmd.callback([&source, &rank_models] {
    if (rank_models.size() == 1) source.model = rank_models.front();
  });
}

void AddWriteFlags(CLI::App& cmd, bool& no_sync, bool& verify_crc) {
  cmd.add_flag("--no-sync", no_sync,
               "Skip the fsyncs (for scratch outputs): still renamed into place only when complete,\n"
               "but a crash soon after may leave a partial file");
  cmd.add_flag("--verify-crc", verify_crc,
               "Check every input record's CRC-32 first (records are copied with the input's CRC)");
}

void AddJsonFlag(CLI::App& cmd, bool& json, std::string_view schema, std::string_view what) {
  cmd.add_flag("--json", json, std::string(what) + " (schemas/" + std::string(schema) + ".schema.json)");
}

void AddQuietFlag(CLI::App& cmd, bool& quiet) { cmd.add_flag("-q,--quiet", quiet, "No progress on stderr"); }

void AddCheckpointPaths(CLI::App& cmd, const char* name, std::vector<std::string>& paths, std::string_view help) {
  cmd.add_option(name, paths, std::string(help))->required();
}

void AddOutputFileFlag(CLI::App& cmd, std::string& output, std::string_view help) {
  cmd.add_option("-o,--output", output, std::string(help))->required();
}

void AddStateKeyFlag(CLI::App& cmd, std::string& state_key, std::string_view help) {
  cmd.add_option("--state-key", state_key, std::string(help));
}

void AddReadLimitFlags(CLI::App& cmd, ReadOptions& read) {
  auto* limits = cmd.add_option_group("Limits", "Refuse inputs beyond these sizes (safe defaults)");
  limits
      ->add_option("--max-depth", read.pickle.max_depth,
                   "Nesting depth of objects (walks of the graph recurse once a level; beyond 5000\n"
                   "they could exhaust the stack)")
      ->check(IntegerRange(1, kMaxPickleDepth, "UINT"))
      ->capture_default_str();
  limits->add_option("--max-memo", read.pickle.max_memo, "Pickle memo entries")->capture_default_str();
  limits
      ->add_option("--max-nodes", read.pickle.max_nodes,
                   "Objects in one pickle (56 bytes each, 88 at most; a parameter with AdamW\n"
                   "state and its weight in the file is ~30 while it is read, as recurring ints,\n"
                   "short strs and tuples of them are one object each, and ~9 once its tensors are)")
      ->capture_default_str();
  limits
      ->add_option("--max-stack", read.pickle.max_stack,
                   "Objects on the pickle's stack at once (Python writes lists and dicts 1000 items\n"
                   "at a time: only a tuple or frozenset this large, or a file built to exhaust memory,\n"
                   "comes near)")
      ->capture_default_str();
  limits->add_option("--max-string-bytes", read.pickle.max_string_bytes, "One str or bytes value")
      ->capture_default_str();
  limits->add_option("--max-storage-bytes", read.max_storage_bytes, "One tensor storage")->capture_default_str();
  limits->add_option("--max-decompressed-bytes", read.max_decompressed_bytes, "Content of a .zst file")
      ->capture_default_str();
}

void AppendWrittenFileJson(const WriteReport& written, nlohmann::ordered_json& doc) {
  doc["bytes"] = written.bytes;
  doc["weights_only_loadable"] = written.unsafe_globals.empty();
  doc["unsafe_globals"] = written.unsafe_globals;
}

int WriteWrittenFileJson(CommandOutput& output, nlohmann::ordered_json doc, const WriteReport& written) {
  AppendWrittenFileJson(written, doc);
  WriteJson(output, doc);
  return kExitOk;
}

nlohmann::ordered_json ParamSourceJson(const MatchedState& m) {
  nlohmann::ordered_json j = {{"from", m.params_from}, {"order", m.order}, {"tied", m.tied}, {"buffers", m.buffers}};
  if (!m.frozen.empty()) j["frozen"] = m.frozen;
  return j;
}

nlohmann::ordered_json RemapEntriesJson(const std::vector<RemapEntry>& entries) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RemapEntry& e : entries) {
    nlohmann::ordered_json j = {{"input_key", e.input_key}, {"fate", e.fate}, {"params", e.params}};
    if (e.fate == "moved") j["output_key"] = e.output_key;
    if (!e.output_keys.empty()) j["output_keys"] = e.output_keys;
    if (e.view >= 0) j["view"] = e.view;
    if (!e.reason.empty()) j["reason"] = e.reason;
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

// "  label   a b c ..." wrapped under the first name at about 100 columns, so
// a model's 60 BatchNorm buffers stay readable.
void WrappedList(std::ostream& out, const std::string& label, const std::vector<std::string>& names) {
  if (names.empty()) return;
  const std::string indent(15, ' ');
  std::string line = label;
  for (const std::string& n : names) {
    if (line.size() > indent.size() + 1 && line.size() + 1 + n.size() > 100) {
      out << line << "\n";
      line = indent.substr(0, indent.size() - 1);
    }
    line += " " + n;
  }
  out << line << "\n";
}

}  // namespace

void WriteParamSourceText(const MatchedState& m, std::ostream& out) {
  out << "  parameters   " << m.params.size() << " from " << m.params_from << ", in " << m.order << "\n";
  WrappedList(out, "  not params   tied duplicates:", m.tied);
  WrappedList(out, "  not params   buffers:", m.buffers);
  WrappedList(out, "  frozen       in no param group:", m.frozen);
}

std::function<void(uint64_t, uint64_t)> PercentProgress(std::ostream& err, std::string_view command) {
  auto last = std::make_shared<int>(-1);
  return [&err, command = std::string(command), last](uint64_t done, uint64_t total) {
    if (total < (64ull << 20)) return;  // done in a blink: progress would only be noise
    int percent = total ? static_cast<int>(100 * done / total) : 100;
    if (percent / 10 == *last / 10) return;
    *last = percent;
    err << "optstate " << command << ": " << percent << "% (" << HumanBytes(done) << " of " << HumanBytes(total)
        << ")\n";
  };
}

std::string FirstNames(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 12; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 12) list += ", ...";
  return list;
}

}  // namespace optstate::tools
