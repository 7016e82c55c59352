// What reshard and export share: the flags of a DCP output (-o, --world-size,
// --no-sync, -q, --distributed, --json), joining the other processes of a
// --distributed job, and the report, written once per job (by rank 0).
#ifndef OPTSTATE_TOOLS_DCP_OUTPUT_H_
#define OPTSTATE_TOOLS_DCP_OUTPUT_H_

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "optstate/dcp.h"

namespace optstate::tools {

struct DcpOutputFlags {
  std::string input;                // inputs[0], or all of them in a report
  std::vector<std::string> inputs;  // several only where `rank_set` was given
  std::string output;
  int world_size = 0;
  bool json = false;
  bool no_sync = false;
  bool verify_crc = false;
  bool quiet = false;
  bool distributed = false;
  // Set by `open` when the command changed what it writes (export's index keys
  // written as FQNs): one line of the text report, "optimizer_keys" in JSON.
  std::string rekeyed_text;
  nlohmann::ordered_json rekeyed;
};

// Adds the input (described by `input_help`; one, or with `rank_set` one or
// more) and every output flag.
void AddDcpOutputFlags(CLI::App& cmd, DcpOutputFlags& flags, const std::string& input_help, bool rank_set = false);

// Runs a DCP-writing command: connects to the job when --distributed, calls
// `open` (whose failure in any process fails every process), then `write`
// with the output options and the coordinator (null when alone), and reports.
int RunDcpOutput(const DcpOutputFlags& flags, std::string_view command, CommandOutput& output,
                 const std::function<Status()>& open,
                 const std::function<StatusOr<DcpWriteReport>(const DcpWriteOptions&, Coordinator*)>& write);

}  // namespace optstate::tools

#endif  // OPTSTATE_TOOLS_DCP_OUTPUT_H_
