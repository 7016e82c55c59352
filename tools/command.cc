#include "command.h"

#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "optstate/file_io.h"

namespace optstate::tools {

std::string JsonText(const nlohmann::ordered_json& doc) {
  return doc.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

CLI::App& AddSubcommand(CLI::App& parent, const CommandHelp& help) {
  CLI::App* cmd = parent.add_subcommand(help.name, help.summary);
  cmd->footer(help.footer);
  return *cmd;
}

void WriteJson(CommandOutput& output, const nlohmann::ordered_json& doc) { output.out << JsonText(doc); }

int ReportError(CommandOutput& output, std::string_view command, const Status& status,
                bool json) {
  if (json) {
    nlohmann::ordered_json doc;
    doc["error"]["code"] = StatusCodeId(status.code());
    doc["error"]["message"] = std::string(status.message());
    WriteJson(output, doc);
  }
  output.err << "optstate " << command << ": error: " << status.ToString() << "\n";
  return kExitError;
}

Status WriteFileAtomically(const std::string& path, std::string_view text) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> w, AtomicFileWriter::Create(path));
  OPTSTATE_RETURN_IF_ERROR(w->Write(AsBytes(text)));
  return w->Commit();
}

namespace {
CoordinatorFactory& Factory() {
  static CoordinatorFactory factory;
  return factory;
}
}  // namespace

void SetCoordinatorFactory(CoordinatorFactory factory) { Factory() = std::move(factory); }

StatusOr<std::unique_ptr<Coordinator>> ConnectCoordinator(const std::string& job) {
  if (!Factory()) {
    return UnsupportedError("--distributed needs optstate-dist (optstate built with LibTorch's c10d), "
                            "installed next to optstate");
  }
  return Factory()(job);
}

Status RequireOutputDirectory(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status();
  return InvalidArgumentError(dir + ": with several inputs, -o names an existing directory that receives one "
                              "output per rank");
}

Status RefuseInputAsOutput(const std::vector<std::string>& inputs, const std::string& output) {
  std::error_code ec;
  if (!std::filesystem::exists(output, ec)) return Status();
  for (const std::string& in : inputs) {
    if (std::filesystem::equivalent(in, output, ec)) {
      return InvalidArgumentError(output + (inputs.size() == 1 ? ": is the input" : ": is an input") +
                                  "; optstate never modifies an input file");
    }
  }
  return Status();
}

}  // namespace optstate::tools
