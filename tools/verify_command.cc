#include "verify_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "verify";

}  // namespace

int RunVerify(const VerifyCommandOptions& o, CommandOutput& output) {
  auto m = OpenAndMatch(o.path, o.state_key, o.params, o.read, o.match);
  if (!m.ok()) return ReportError(output, kName, m.status(), o.json);
  auto report = VerifyState(*m, o.verify);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.path), o.json);
  const VerifyReport& r = *report;
  int exit = r.findings.empty() ? kExitOk : kExitFindings;
  if (o.json) {
    nlohmann::ordered_json doc = {{"file", o.path}, {"params_source", ParamSourceJson(*m)},
                                  {"state_path", m->state.path}, {"scheme", KeyKindName(m->state.scheme)},
                                  {"params", r.params}, {"replayed", r.replayed},
                                  {"values_from_model", r.values_from_model}, {"cold", r.cold}};
    doc["findings"] = nlohmann::ordered_json::array();
    for (const VerifyFinding& f : r.findings) {
      doc["findings"].push_back({{"param", f.param}, {"check", f.check}, {"message", f.message}});
    }
    doc["clean"] = r.findings.empty();
    WriteJson(output, doc);
    return exit;
  }
  output.out << o.path << ": optimizer state at " << (m->state.path.empty() ? "(root)" : m->state.path) << ", keys "
             << KeyKindName(m->state.scheme) << "\n";
  WriteParamSourceText(*m, output.out);
  output.out << "  replayed     " << r.replayed << " of " << r.params << " parameters, one AdamW step each from "
             << (r.values_from_model        ? "the model's values"
                 : !o.params.manifest.empty() ? "synthetic values (a manifest has none)"
                                              : "synthetic values where the model's do not fit (DTensor shards)")
             << "\n";
  output.out << "  cold         " << r.cold.size() << (r.cold.empty() ? "" : ": state missing, zero or unmapped")
             << "\n";
  if (r.findings.empty()) {
    output.out << "clean: every parameter has state that fits it and changes its update\n";
  } else {
    output.out << r.findings.size() << (r.findings.size() == 1 ? " finding:\n" : " findings:\n");
    for (const VerifyFinding& f : r.findings) {
      output.out << "  " << f.check << "  " << (f.param.empty() ? "" : f.param + ": ") << f.message << "\n";
    }
  }
  return exit;
}

CommandRunner AddVerifyCommand(CLI::App& parent) {
  auto o = std::make_shared<VerifyCommandOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Check that AdamW state belongs to and acts on the model's parameters: shapes, steps, finite\n"
             "values, and a replayed step that tells live state from cold (missing, zero or unmapped)");
  cmd->add_option("path", o->path, "Checkpoint holding the optimizer state")->required();
  AddParamSourceFlags(*cmd, o->params);
  cmd->add_option("--state-key", o->state_key, "Where the optimizer state dict is (default: find it)");
  cmd->add_option("--probe-seed", o->verify.probe_seed, "Seed of the probe gradient")->capture_default_str();
  cmd->add_flag("--json", o->json, "Write JSON (schemas/verify.schema.json)");
  cmd->footer(
      "\nExit codes: 0 clean; 1 findings; 2 unreadable.\n"
      "\nExamples:\n"
      "  optstate verify checkpoint.pt                 # the parameters from its own 'model' entry\n"
      "  optstate verify --model model.pt optimizer.pt\n"
      "  optstate verify --manifest params.json --json optimizer.pt");
  return [o](CommandOutput& output) { return RunVerify(*o, output); };
}

}  // namespace optstate::tools
