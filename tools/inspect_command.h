// `optstate inspect PATH`: what is inside a checkpoint, without loading tensors.
#ifndef OPTSTATE_TOOLS_INSPECT_COMMAND_H_
#define OPTSTATE_TOOLS_INSPECT_COMMAND_H_

#include <string>
#include <vector>

#include "commands.h"
#include "optstate/checkpoint.h"
#include "optstate/inspect_report.h"

namespace optstate::tools {

struct InspectOptions {
  std::string path;                // the file shown (paths[0] unless a rank set is shown)
  std::vector<std::string> paths;  // as given: one file or DCP directory, or every rank's file
  bool json = false;
  bool records = false;  // list every zip record
  bool each = false;     // every path its own checkpoint; directories searched for them
  unsigned jobs = 0;     // with each: checkpoints read at once (0: one per core)
  ReadOptions read;      // limits and --verify-crc
  InspectReportOptions report;
};

int RunInspect(const InspectOptions& options, CommandOutput& output);

// Rendering (inspect_render.cc).
void WriteInspectText(const InspectOptions& options, const Checkpoint& checkpoint,
                      const InspectReport& report, std::ostream& out);
nlohmann::ordered_json InspectJson(const InspectOptions& options, const Checkpoint& checkpoint,
                                   const InspectReport& report);
// The parts shared with DCP directories: the tree, optimizer summaries and findings.
void WriteContentsText(const InspectOptions& options, const Checkpoint& checkpoint, const InspectReport& report,
                       std::ostream& out);
void AddContentsJson(const InspectOptions& options, const Checkpoint& checkpoint, const InspectReport& report,
                     nlohmann::ordered_json& doc);

// A DCP checkpoint directory (inspect_dcp.cc).
int RunInspectDcp(const InspectOptions& options, CommandOutput& output);

// A DeepSpeed ZeRO tag directory (inspect_zero.cc).
int RunInspectZero(const InspectOptions& options, const std::string& tag_dir, CommandOutput& output);

// The per-rank files of one sharded save (inspect_rank_set.cc).
int RunInspectRankSet(const InspectOptions& options, CommandOutput& output);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_INSPECT_COMMAND_H_
