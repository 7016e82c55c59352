// Flags shared by several commands: where the parameters come from (--manifest,
// --model, --model-key; collisions and remap) and how both report it, and how
// outputs are written (remap, repack).
#ifndef OPTSTATE_TOOLS_SHARED_FLAGS_H_
#define OPTSTATE_TOOLS_SHARED_FLAGS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "optstate/checkpoint.h"
#include "optstate/checkpoint_writer.h"
#include "optstate/collisions.h"

namespace CLI {
class App;
}

namespace optstate::tools {

// What the commands that read optimizer state against its parameters share
// (collisions, remap, migrate, verify, validate): each one's options derive from it.
struct StateInputs {
  std::vector<std::string> paths;   // one file, or the per-rank files of one sharded save
  std::vector<std::string> models;  // --model, once per rank
  ParamSource params;               // --manifest, --model, --model-key
  std::string state_key;            // --state-key: where the optimizer state dict is; "" = find it
  MatchOptions match;
  ReadOptions read;

  // The checkpoint a single-file run reads: the first of paths ("" when none is given).
  const std::string& path() const {
    static const std::string kNone;
    return paths.empty() ? kNone : paths.front();
  }
};

// Opens every rank's file of `in` and matches each against its parameters.
StatusOr<RankSetMatch> OpenAndMatchRankSet(const StateInputs& in);

void AddParamSourceFlags(CLI::App& cmd, ParamSource& source);
// The same with --model repeatable (one per rank of a sharded save): a single
// --model also lands in source.model.
void AddParamSourceFlags(CLI::App& cmd, ParamSource& source, std::vector<std::string>& rank_models);

// The required positional checkpoint paths, `name` in the usage line: one file
// or directory, or the per-rank files of one sharded save.
void AddCheckpointPaths(CLI::App& cmd, const char* name, std::vector<std::string>& paths, std::string_view help);

// --no-sync and --verify-crc, for the commands that write a checkpoint.
void AddWriteFlags(CLI::App& cmd, bool& no_sync, bool& verify_crc);

// --json: "<what> (schemas/<schema>.schema.json)", naming the schema the output follows.
void AddJsonFlag(CLI::App& cmd, bool& json, std::string_view schema,
                 std::string_view what = "Write the report as JSON");
// -q,--quiet: no progress on stderr.
void AddQuietFlag(CLI::App& cmd, bool& quiet);
// -o,--output, required: one output file, written beside itself and renamed
// (or, as a command's help says, a directory for the outputs of a rank set).
void AddOutputFileFlag(CLI::App& cmd, std::string& output,
                       std::string_view help = "Output file; written to a temporary file beside it, then renamed");
// --state-key: where the optimizer state dict is in the file.
void AddStateKeyFlag(CLI::App& cmd, std::string& state_key,
                     std::string_view help = "Where the optimizer state dict is (default: find it)");

// The "Limits" group: how large an input may be before it is refused
// (--max-depth, --max-memo, --max-nodes, --max-stack, --max-string-bytes,
// --max-storage-bytes, --max-decompressed-bytes). The defaults are safe; a checkpoint of 10^6
// parameters needs more objects than --max-nodes allows.
void AddReadLimitFlags(CLI::App& cmd, ReadOptions& read);

// {"from", "order", "tied", "buffers"} (the "params_source" object of the schemas).
nlohmann::ordered_json ParamSourceJson(const MatchedState& m);

// The written file's part of a writing command's JSON report, appended to `doc`:
// "bytes", "weights_only_loadable" and "unsafe_globals" (torch.load's verdict on it).
void AppendWrittenFileJson(const WriteReport& written, nlohmann::ordered_json& doc);
// A writing command's whole JSON report: `doc`, the written file's part appended,
// on output.out. Returns kExitOk.
int WriteWrittenFileJson(CommandOutput& output, nlohmann::ordered_json doc, const WriteReport& written);

// Every input entry's fate (the "entries" array of remap's and migrate's reports).
nlohmann::ordered_json RemapEntriesJson(const std::vector<RemapEntry>& entries);

// "  parameters   9 from manifest m.json" plus the dropped model entries, for text reports.
void WriteParamSourceText(const MatchedState& m, std::ostream& out);

// "a, b, c" of the first 12 names, then ", ..." when there are more: the
// parameters an error names without flooding the terminal.
std::string FirstNames(const std::vector<std::string>& names);

// Progress on stderr every 10%: "optstate <command>: 40% (1.2 GiB of 3.0 GiB)";
// nothing for jobs under 64 MiB.
std::function<void(uint64_t done, uint64_t total)> PercentProgress(std::ostream& err, std::string_view command);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_SHARED_FLAGS_H_
