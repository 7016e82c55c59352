// inspect's and validate's whole report, rendered as text and as JSON, for any
// bytes: no renderer may throw (nlohmann's dump aborted the process on a record
// name that was not UTF-8), every JSON document must parse back, and the text,
// once through the terminal-safe filter, must hold no control character but
// newline and tab and be valid UTF-8 (issue 20, item 4).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "inspect_command.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "optstate/inspect_report.h"
#include "terminal_safe_stream.h"
#include "torch/container.h"
#include "validate_command.h"

namespace {

void CheckJson(const std::string& text, const char* what) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) optstate::fuzz::FuzzCheckFailed(std::string(what) + ": JSON does not parse back");
}

void CheckText(const std::string& raw, const char* what) {
  std::string safe = optstate::tools::EscapeForTerminal(raw);
  for (unsigned char c : safe) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      optstate::fuzz::FuzzCheckFailed(std::string(what) + ": a control character survived the filter");
    }
  }
  if (optstate::tools::EscapeForTerminal(safe) != safe) {
    optstate::fuzz::FuzzCheckFailed(std::string(what) + ": filtered text is not a fixed point (invalid UTF-8 left)");
  }
}

// Validate reads a path: the input goes to a scratch file for the two runs.
void RenderValidate(const uint8_t* data, size_t size) {
  std::string path = (std::filesystem::temp_directory_path() / "optstate-render-fuzz-XXXXXX").string();
  int fd = ::mkstemp(path.data());
  if (fd < 0) return;
  bool written = ::write(fd, data, size) == static_cast<ssize_t>(size);
  ::close(fd);
  if (written) {
    for (bool json : {false, true}) {
      optstate::tools::ValidateCommandOptions o;
      o.paths = {path};
      o.json = json;
      std::ostringstream out, err;
      optstate::tools::CommandOutput output{out, err};
      (void)optstate::tools::RunValidate(o, output);
      if (json) CheckJson(out.str(), "validate --json");
      CheckText(json ? err.str() : out.str() + err.str(), "validate");
    }
  }
  std::filesystem::remove(path);
}

}  // namespace

OPTSTATE_FUZZ_TARGET(render) {
  using namespace optstate;
  ByteSpan bytes = fuzz::Bytes(data, size);
  ReadOptions read;
  read.pickle.max_nodes = 1u << 20;
  read.resolve_offsets = true;
  StatusOr<Checkpoint> cp = ParseCheckpoint(ByteCursor(bytes), read);
  if (cp.ok()) {
    TensorBytesReader reader = [&](const TensorRef& t) { return ReadTensorBytes(bytes, *cp, t); };
    InspectReportOptions report_options;
    report_options.max_step_reads = 4;
    StatusOr<InspectReport> report = BuildInspectReport(*cp, reader, report_options);
    if (report.ok()) {
      tools::InspectOptions o;
      o.path = "fuzz-input.pt";
      o.paths = {o.path};
      o.records = true;
      std::ostringstream text;
      tools::WriteInspectText(o, *cp, *report, text);
      CheckText(text.str(), "inspect");
      CheckJson(tools::JsonText(tools::InspectJson(o, *cp, *report)), "inspect --json");
    }
  }
  RenderValidate(data, size);
  return 0;
}
