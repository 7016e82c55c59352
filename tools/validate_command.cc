#include "validate_command.h"

#include <algorithm>
#include <iomanip>
#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/file_io.h"
#include "shared_flags.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "validate";

nlohmann::ordered_json ReportJson(const ValidationReport& r) {
  using J = nlohmann::ordered_json;
  J doc = {{"input", r.input}, {"format", r.format}, {"passed", !r.failed()}, {"value_bytes", r.value_bytes}};
  doc["findings"] = J::array();
  for (const ValidationFinding& f : r.findings) {
    doc["findings"].push_back({{"rule", f.rule}, {"severity", RuleSeverityName(f.severity)}, {"path", f.path},
                               {"message", f.message}});
  }
  doc["rules"] = J::array();
  for (const std::string& id : r.checked) doc["rules"].push_back({{"id", id}, {"status", "checked"}});
  for (const auto& [id, why] : r.skipped) doc["rules"].push_back({{"id", id}, {"status", "skipped"}, {"reason", why}});
  doc["allowlisted_globals"] = r.allowlisted;
  return doc;
}

void ReportText(const ValidationReport& r, std::ostream& out) {
  size_t errors = 0, warnings = 0;
  for (const ValidationFinding& f : r.findings) {
    errors += f.severity == RuleSeverity::kError;
    warnings += f.severity == RuleSeverity::kWarning;
  }
  out << r.input << ": " << (r.failed() ? "FAILED" : "passed") << " (" << errors << " errors, " << warnings
      << " warnings, " << r.findings.size() - errors - warnings << " notes; " << r.checked.size() << " rules checked)\n";
  for (const ValidationFinding& f : r.findings) {
    out << "  " << std::left << std::setw(8) << RuleSeverityName(f.severity) << "[" << f.rule << "] " << f.path << ": "
        << f.message << "\n";
  }
  // Rules skipped for the same reason share one line.
  for (size_t i = 0; i < r.skipped.size();) {
    size_t j = i + 1;
    std::string ids = r.skipped[i].first;
    for (; j < r.skipped.size() && r.skipped[j].second == r.skipped[i].second; ++j) ids += ", " + r.skipped[j].first;
    out << "  skipped [" << ids << "]: " << r.skipped[i].second << "\n";
    i = j;
  }
  for (const std::string& a : r.allowlisted) out << "  allowlisted by the rules file: " << a << "\n";
}

}  // namespace

int RunValidate(const ValidateCommandOptions& o, CommandOutput& output) {
  if (o.list_rules) {
    // Columns as wide as the longest id, so an id never runs into its severity.
    size_t width = 0;
    for (const RuleInfo& rule : ValidationRules()) width = std::max(width, std::string(rule.id).size());
    for (const RuleInfo& rule : ValidationRules()) {
      output.out << std::left << std::setw(static_cast<int>(width + 2)) << rule.id << std::setw(9)
                 << RuleSeverityName(rule.default_severity) << rule.checks
                 << (rule.needs_values ? " (reads values)" : "") << "\n";
    }
    return kExitOk;
  }
  if (o.path.empty()) return ReportError(output, kName, InvalidArgumentError("give a checkpoint file or DCP directory"), o.json);
  ValidateOptions vo;
  vo.scan_values = !o.no_values;
  vo.read = o.read;
  vo.state_key = o.state_key;
  if (!o.params.manifest.empty() || !o.params.model.empty() || !o.params.model_key.empty()) vo.params = o.params;
  if (!o.rules.empty()) {
    auto file = MappedFile::Open(o.rules);
    if (!file.ok()) return ReportError(output, kName, file.status(), o.json);
    auto rules = ParseRulesFile(AsChars(file->bytes()));
    if (!rules.ok()) return ReportError(output, kName, std::move(rules).status().WithContext(o.rules), o.json);
    vo.severities = std::move(rules->severities);
    vo.allowed_globals = std::move(rules->allowed_globals);
  }
  bool rank_set = o.paths.size() > 1 || o.models.size() > 1;
  auto report = rank_set ? ValidateRankSet(o.paths, o.models, vo) : Validate(o.path, vo);
  if (!report.ok()) return ReportError(output, kName, report.status(), o.json);
  if (!o.junit.empty()) {
    Status s = WriteFileAtomically(o.junit, ValidationJUnit(*report));
    if (!s.ok()) return ReportError(output, kName, s, o.json);
  }
  if (o.json) {
    WriteJson(output, ReportJson(*report));
  } else {
    ReportText(*report, output.out);
  }
  return report->failed() ? kExitFindings : kExitOk;
}

CommandRunner AddValidateCommand(CLI::App& parent) {
  auto o = std::make_shared<ValidateCommandOptions>();
  CLI::App* cmd = parent.add_subcommand(
      kName, "Check a checkpoint for CI: rules with stable ids (broken state keys, lr=0 leaks, untrained\n"
             "init state, non-finite values, unsafe pickles, CRC mismatches, DCP chunk layout); exit 1 on errors");
  cmd->add_option("path", o->paths,
                  "torch.save file, .zst, or DCP checkpoint directory; several files: the per-rank files\n"
                  "of one sharded save (in rank order, or named rank<N>), with --model once per rank");
  AddParamSourceFlags(*cmd, o->params, o->models);
  cmd->add_option("--state-key", o->state_key,
                  "Which optimizer state dict the parameter rules check when the file holds several\n"
                  "(default: the only one); every other rule checks them all");
  cmd->add_option("--rules", o->rules,
                  "JSON rules file: {\"rules\": {\"<id>\": \"off|info|warning|error\"}} "
                  "(schemas/validate-rules.schema.json)");
  cmd->add_option("--junit", o->junit, "Also write a JUnit XML report here (one test case per rule)");
  cmd->add_flag("--no-values", o->no_values, "Structure only: do not read tensor bytes (rules that need them are skipped)");
  cmd->add_flag("--list-rules", o->list_rules, "List every rule with its default severity, and exit");
  cmd->add_flag("--json", o->json, "Write the report as JSON (schemas/validate.schema.json)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate validate checkpoint.pt\n"
      "  optstate validate checkpoints/step_1000 --junit reports/optstate.xml\n"
      "  optstate validate --no-values --rules ci-rules.json checkpoint.pt --json\n"
      "  optstate validate --manifest params.json heavyball_fsdp.pt     (counts, groups, collisions, orphans, shapes)\n"
      "  optstate validate --model model.pt checkpoints/step_1000       (a DCP directory against a model state_dict)\n"
      "  optstate validate rank0.optim.pt rank1.optim.pt --model rank0.model.pt --model rank1.model.pt\n"
      "  optstate validate --list-rules");
  return [o](CommandOutput& output) {
    if (!o->paths.empty()) o->path = o->paths.front();
    return RunValidate(*o, output);
  };
}

}  // namespace optstate::tools
