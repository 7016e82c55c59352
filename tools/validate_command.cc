#include "validate_command.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <set>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "optstate/dcp.h"
#include "optstate/file_io.h"
#include "optstate/validate.h"
#include "each_checkpoint.h"
#include "shared_flags.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "validate";

void DeclareFlags(CLI::App& cmd, ValidateCommandOptions& o) {
  cmd.add_option("path", o.paths,
                 "torch.save file, .zst, DCP checkpoint directory, or a framework's checkpoint\n"
                 "directory (HF Trainer checkpoint-N/, accelerate save_state, DeepSpeed global_stepN/:\n"
                 "each file checked, the optimizer against the model beside it); several files: the\n"
                 "per-rank files of one sharded save (in rank order, or named rank<N>), with --model once\n"
                 "per rank");
  AddParamSourceFlags(cmd, o.params, o.models);
  AddStateKeyFlag(cmd, o.state_key,
                  "Which optimizer state dict the parameter rules check when the file holds several\n"
                  "(default: the only one); every other rule checks them all");
  cmd.add_option("--rules", o.rules,
                 "JSON rules file: {\"rules\": {\"<id>\": \"off|info|warning|error\"},\n"
                 "\"allow_globals\": [\"module.name\", ...]} (schemas/validate-rules.schema.json)");
  cmd.add_option("--junit", o.junit, "Also write a JUnit XML report here (one test case per rule)");
  cmd.add_flag("--no-values", o.no_values,
               "Structure only: do not read tensor bytes (rules that need them are skipped)");
  cmd.add_flag("--list-rules", o.list_rules, "List every rule with its default severity, and exit");
  AddEachFlags(cmd, o.each, o.jobs,
               "Every path its own checkpoint (not the ranks of one save); a directory that is no checkpoint\n"
               "itself is searched for checkpoints (files, DCP and framework directories): one report each,\n"
               "in the order found, then a summary; exit 2 if any could not be read, else 1 if any failed",
               "checked");
  AddJsonFlag(cmd, o.json, "validate");
  AddReadLimitFlags(cmd, o.read);
}

nlohmann::ordered_json ReportJson(const ValidationReport& r) {
  using J = nlohmann::ordered_json;
  const bool passed = !r.failed() && r.format != "unreadable";
  J doc = {{"input", r.input}, {"format", r.format}, {"passed", passed}, {"value_bytes", r.value_bytes}};
  doc["findings"] = J::array();
  for (const ValidationFinding& f : r.findings) {
    doc["findings"].push_back({{"rule", f.rule}, {"severity", RuleSeverityName(f.severity)}, {"path", f.path},
                               {"message", f.message}});
    if (!f.global.empty()) doc["findings"].back()["global"] = f.global;
  }
  doc["rules"] = J::array();
  for (const std::string& id : r.checked) doc["rules"].push_back({{"id", id}, {"status", "checked"}});
  for (const auto& [id, why] : r.skipped) doc["rules"].push_back({{"id", id}, {"status", "skipped"}, {"reason", why}});
  doc["allowlisted_globals"] = r.allowlisted;
  doc["torch_load"] = {{"weights_only", r.torch_load.weights_only}, {"reasons", r.torch_load.reasons}};
  if (r.read_error) {
    doc["read_error"] = {{"message", r.read_error->message},
                         {"scanned", r.read_error->scanned},
                         {"stopped_at", r.read_error->stopped_at},
                         {"not_scanned", r.read_error->not_scanned}};
  }
  return doc;
}

void ReportText(const ValidationReport& r, std::ostream& out) {
  size_t errors = 0, warnings = 0;
  for (const ValidationFinding& f : r.findings) {
    errors += f.severity == RuleSeverity::kError;
    warnings += f.severity == RuleSeverity::kWarning;
  }
  out << r.input << ": " << (r.failed() ? "FAILED" : r.format == "unreadable" ? "NOT READ" : "passed") << " (" << errors << " errors, " << warnings
      << " warnings, " << r.findings.size() - errors - warnings << " notes; " << r.checked.size() << " rules checked)\n";
  if (r.read_error) {
    out << "  not readable as a checkpoint: " << r.read_error->message << "\n"
        << "  scanned instead what torch.load would run: " << r.read_error->scanned << "\n";
    if (!r.read_error->stopped_at.empty()) out << "  torch.load stops " << r.read_error->stopped_at << "\n";
    for (const std::string& n : r.read_error->not_scanned) out << "  not scanned: " << n << "\n";
  }
  for (const ValidationFinding& f : r.findings) {
    out << "  " << std::left << std::setw(8) << RuleSeverityName(f.severity) << "[" << f.rule << "] " << OneLine(f.path)
        << ": " << OneLine(f.message) << "\n";
  }
  // Rules skipped for the same reason share one line.
  for (size_t i = 0; i < r.skipped.size();) {
    size_t j = i + 1;
    std::string ids = r.skipped[i].first;
    for (; j < r.skipped.size() && r.skipped[j].second == r.skipped[i].second; ++j) ids += ", " + r.skipped[j].first;
    out << "  skipped [" << ids << "]: " << OneLine(r.skipped[i].second) << "\n";
    i = j;
  }
  for (const std::string& a : r.allowlisted) out << "  allowlisted by the rules file: " << a << "\n";
  // Globals off the allowlist are findings already; other reasons are said here.
  for (const std::string& why : r.torch_load.reasons) {
    if (!why.starts_with("global ")) out << "  torch 2.6's torch.load (weights_only=True) refuses it: " << OneLine(why) << "\n";
  }
}

// One report of a framework directory for JUnit: every file's findings, their
// paths prefixed with the file; a rule checked if it ran on some file, skipped
// (with the first reason) if it ran on none.
ValidationReport MergedForJUnit(const std::string& dir, const std::vector<std::pair<std::string, ValidationReport>>& all) {
  ValidationReport merged;
  merged.input = dir;
  std::set<std::string> checked;
  for (const auto& [file, r] : all) {
    for (ValidationFinding f : r.findings) {
      f.path = file + ": " + f.path;
      merged.findings.push_back(std::move(f));
    }
    checked.insert(r.checked.begin(), r.checked.end());
  }
  merged.checked.assign(checked.begin(), checked.end());
  std::set<std::string> skipped;
  for (const auto& [file, r] : all) {
    for (const auto& [id, why] : r.skipped) {
      if (!checked.count(id) && skipped.insert(id).second) merged.skipped.emplace_back(id, file + ": " + why);
    }
  }
  return merged;
}

// A framework's checkpoint directory: each file checked on its own, the
// optimizer against the model file beside it (unless --model/--manifest say otherwise).
int RunFrameworkDir(const ValidateCommandOptions& o, const ValidateOptions& vo, const FrameworkDir& fd,
                    CommandOutput& output) {
  using J = nlohmann::ordered_json;
  std::vector<std::pair<std::string, ValidationReport>> reports;
  std::vector<std::pair<std::string, std::string>> unread;  // (path, why)
  J files = J::array();
  bool failed = false;
  // DeepSpeed: the rank files checked as one save first (layout, every rank
  // there, ranks agreeing); then each file on its own.
  std::optional<ValidationReport> zero;
  if (fd.layout == "deepspeed") {
    auto z = ValidateZeroDirectory(fd.TagDirectory(o.path()), vo);
    if (!z.ok()) return ReportError(output, kName, z.status(), o.json);
    failed |= z->failed();
    zero = std::move(*z);
  }
  const FrameworkFile* model = fd.Find("model");
  for (const FrameworkFile& f : fd.files) {
    J entry = {{"role", f.role}, {"path", f.path}};
    if (!f.checkpoint) {
      entry["report"] = nullptr;
      files.push_back(std::move(entry));
      continue;
    }
    ValidateOptions each = vo;
    if (f.role == "optimizer" && !vo.params && model != nullptr && fd.layout != "deepspeed") {
      each.params = ParamSource{"", model->path, ""};
    }
    if (f.role != "optimizer") each.params.reset();
    auto r = Validate(f.path, each);
    // A file of no known role in a directory inside (found by walking it)
    // that is no checkpoint at all is listed, not a reason to stop: what
    // torch.load would run of it came back above as findings if it mattered.
    if (!r.ok() && f.role == "other" && f.path.find('/', o.path().size() + 1) != std::string::npos) {
      entry["report"] = nullptr;
      files.push_back(std::move(entry));
      unread.emplace_back(f.path, r.status().ToString());
      continue;
    }
    if (!r.ok()) return ReportError(output, kName, r.status(), o.json);
    failed |= r->failed();
    entry["report"] = ReportJson(*r);
    files.push_back(std::move(entry));
    reports.emplace_back(f.path, std::move(*r));
  }
  if (zero) reports.insert(reports.begin(), {zero->input, *zero});
  if (!o.junit.empty()) {
    Status s = WriteFileAtomically(o.junit, ValidationJUnit(MergedForJUnit(o.path(), reports)));
    if (!s.ok()) return ReportError(output, kName, s, o.json);
  }
  if (o.json) {
    J doc{{"directory", o.path()}};
    if (!fd.tag.empty()) doc["tag"] = fd.tag;
    doc.update(J{{"layout", fd.layout}, {"passed", !failed}});
    if (zero) doc["zero_layout"] = ReportJson(*zero);
    doc.update(J{{"files", files}, {"missing", fd.missing}});
    WriteJson(output, doc);
    return failed ? kExitFindings : kExitOk;
  }
  output.out << o.path() << (fd.tag.empty() ? "" : " (tag " + fd.tag + ", from its latest file)") << ": "
             << fd.layout << " checkpoint directory, " << fd.files.size() << " files: "
             << (failed ? "FAILED" : "passed") << "\n";
  for (const std::string& m : fd.missing) output.out << "  missing: " << m << "\n";
  for (const FrameworkFile& f : fd.files) {
    if (!f.checkpoint) output.out << "  " << f.path << ": not a checkpoint (listed, not checked)\n";
  }
  for (const auto& [path, why] : unread) output.out << "  " << path << ": not read as a checkpoint (" << why << ")\n";
  for (const auto& [file, r] : reports) {
    output.out << "\n";
    ReportText(r, output.out);
  }
  return failed ? kExitFindings : kExitOk;
}

// The library's options from the flags, the rules file read.
StatusOr<ValidateOptions> ValidateOptionsFrom(const ValidateCommandOptions& o) {
  ValidateOptions vo;
  vo.scan_values = !o.no_values;
  vo.read = o.read;
  vo.state_key = o.state_key;
  if (!o.params.manifest.empty() || !o.params.model.empty() || !o.params.model_key.empty()) vo.params = o.params;
  if (!o.rules.empty()) {
    auto file = MappedFile::Open(o.rules);
    if (!file.ok()) return file.status();
    auto rules = ParseRulesFile(AsChars(file->bytes()));
    if (!rules.ok()) return std::move(rules).status().WithContext(o.rules);
    vo.severities = std::move(rules->severities);
    vo.allowed_globals = std::move(rules->allowed_globals);
  }
  return vo;
}

// --each: ValidateOne on every checkpoint under the paths (each_checkpoint.h).
int RunValidateEach(const ValidateCommandOptions& o, const ValidateOptions& vo, CommandOutput& output) {
  if (!o.junit.empty()) {
    return ReportError(output, kName,
                       InvalidArgumentError("--junit writes one checkpoint's report: with --each, run validate "
                                            "--junit once per checkpoint"),
                       o.json);
  }
  if (o.models.size() > 1) {
    return ReportError(output, kName,
                       InvalidArgumentError("--each checks every checkpoint against the same parameters: give "
                                            "--model at most once (several are for the ranks of one save)"),
                       o.json);
  }
  EachOptions each;
  each.command = kName;
  each.paths = o.paths;
  each.jobs = o.jobs;
  each.json = o.json;
  each.gate = true;
  return RunEach(each, output, [&](const std::string& path, CommandOutput& one_output) {
    ValidateCommandOptions one = o;
    one.each = false;
    one.paths = {path};
    return ValidateOne(one, vo, one_output);
  });
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
  if (o.path().empty()) return ReportError(output, kName, InvalidArgumentError("give a checkpoint file or DCP directory"), o.json);
  auto vo = ValidateOptionsFrom(o);
  if (!vo.ok()) return ReportError(output, kName, vo.status(), o.json);
  if (o.each) return RunValidateEach(o, *vo, output);
  return ValidateOne(o, *vo, output);
}

int ValidateOne(const ValidateCommandOptions& o, const ValidateOptions& vo, CommandOutput& output) {
  bool rank_set = o.paths.size() > 1 || o.models.size() > 1;
  std::error_code ec;
  if (!rank_set && std::filesystem::is_directory(o.path(), ec) && !IsDcpDirectory(o.path())) {
    auto fd = FindFrameworkFiles(o.path());
    if (!fd.ok()) return ReportError(output, kName, fd.status(), o.json);
    return RunFrameworkDir(o, vo, *fd, output);
  }
  auto report = rank_set ? ValidateRankSet(o.paths, o.models, vo) : Validate(o.path(), vo);
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
  // Unreadable with only warnings (what torch.load would resolve before failing): still exit 2.
  return report->failed() ? kExitFindings : report->format == "unreadable" ? kExitError : kExitOk;
}

namespace {
}  // namespace

constexpr CommandHelp kHelp = {
    kName,
    "Check a checkpoint for CI: rules with stable ids (broken state keys, lr=0 leaks, untrained\n"
    "init state, non-finite values, unsafe pickles, CRC mismatches, DCP chunk layout); exit 1 on errors",
    "\nExamples:\n"
    "  optstate validate checkpoint.pt\n"
    "  optstate validate checkpoints/step_1000 --junit reports/optstate.xml\n"
    "  optstate validate output/checkpoint-500                         (HF Trainer: model, optimizer, rng, ...)\n"
    "  optstate validate --no-values --rules ci-rules.json checkpoint.pt --json\n"
    "  optstate validate --manifest params.json heavyball_fsdp.pt     (counts, groups, collisions, orphans, shapes)\n"
    "  optstate validate --model model.pt checkpoints/step_1000       (a DCP directory against a model state_dict)\n"
    "  optstate validate rank0.optim.pt rank1.optim.pt --model rank0.model.pt --model rank1.model.pt\n"
    "  optstate validate --each -j 2 runs/                                (every checkpoint under runs/)\n"
    "  optstate validate --list-rules",
};

CommandRunner AddValidateCommand(CLI::App& parent) {
  return DeclareCommand(parent, kHelp, DeclareFlags, RunValidate);
}

}  // namespace optstate::tools
