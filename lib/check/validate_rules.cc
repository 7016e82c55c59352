// The rule catalogue and rules files: ids, default severities, parsing, and
// the sink that records findings at the severity they give.
#include <nlohmann/json.hpp>

#include <map>

#include "check/finding_sink.h"
#include "check/validate_checkpoint.h"
#include "io/enum_names.h"
#include "optstate/validate.h"

#include "torch/security.h"

namespace optstate {

namespace {
constexpr EnumNames<RuleSeverity, 4> kRuleSeverityNames({{
    {RuleSeverity::kOff, "off"}, {RuleSeverity::kInfo, "info"}, {RuleSeverity::kWarning, "warning"},
    {RuleSeverity::kError, "error"}}},
    "error");
}  // namespace

std::string_view RuleSeverityName(RuleSeverity s) { return kRuleSeverityNames.Name(s); }

std::optional<RuleSeverity> RuleSeverityFromName(std::string_view name) { return kRuleSeverityNames.Find(name); }

namespace {

// The columns of validation_rules.def.
enum RuleTraits : unsigned {
  kValues = 1, kParams = 2, kRankSet = 4, kOptimizer = 8, kJudgesPickles = 16, kSecurityFinding = 32,
};

struct RuleRow {
  RuleInfo info;
  unsigned traits;
};

const std::vector<RuleRow>& RuleTable() {
  using enum RuleSeverity;
  static const std::vector<RuleRow> kRows = {
#define OPTSTATE_RULE(id, severity, traits, checks)                                                     \
  {{id, severity, checks, ((traits) & kValues) != 0, ((traits) & kParams) != 0, ((traits) & kRankSet) != 0, \
    ((traits) & kOptimizer) != 0},                                                                      \
   (traits)},
#include "check/validation_rules.def"
#undef OPTSTATE_RULE
  };
  return kRows;
}

bool RuleHas(std::string_view id, unsigned trait) {
  for (const RuleRow& row : RuleTable()) {
    if (row.info.id == id) return (row.traits & trait) != 0;
  }
  return false;
}

}  // namespace

const std::vector<RuleInfo>& ValidationRules() {
  static const std::vector<RuleInfo> kRules = [] {
    std::vector<RuleInfo> rules;
    for (const RuleRow& row : RuleTable()) rules.push_back(row.info);
    return rules;
  }();
  return kRules;
}

bool JudgesPickles(std::string_view rule) { return RuleHas(rule, kJudgesPickles); }

StatusOr<RulesFile> ParseRulesFile(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidArgumentError("rules file: not a JSON object");
  const char* shape =
      "rules file: needs {\"rules\": {\"<rule id>\": \"off|info|warning|error\"}} and/or {\"allow_globals\": "
      "[\"module.name\", ...]}";
  auto rules = doc.find("rules");
  auto globals = doc.find("allow_globals");
  if ((rules == doc.end() && globals == doc.end()) || (rules != doc.end() && !rules->is_object())) {
    return InvalidArgumentError(shape);
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "rules" && it.key() != "allow_globals") {
      return InvalidArgumentError("rules file: unknown key '" + it.key() + "'; " + shape);
    }
  }
  RulesFile out;
  if (rules != doc.end()) {
    for (auto it = rules->begin(); it != rules->end(); ++it) {
      bool known = false;
      for (const RuleInfo& r : ValidationRules()) known |= r.id == it.key();
      if (!known) {
        return InvalidArgumentError("rules file: unknown rule '" + it.key() + "' (optstate validate --list-rules)");
      }
      if (!it->is_string() || !RuleSeverityFromName(it->get<std::string>())) {
        return InvalidArgumentError("rules file: rule '" + it.key() +
                                    "' needs one of \"off\", \"info\", \"warning\", \"error\"");
      }
      out.severities[it.key()] = *RuleSeverityFromName(it->get<std::string>());
    }
  }
  if (globals != doc.end()) {
    if (!globals->is_array()) return InvalidArgumentError(shape);
    for (size_t i = 0; i < globals->size(); ++i) {
      const nlohmann::json& g = (*globals)[i];
      const std::string where = "rules file: allow_globals[" + std::to_string(i) + "]";
      if (!g.is_string()) return InvalidArgumentError(where + ": expected a string \"module.name\"");
      const std::string name = g.get<std::string>();
      const size_t dot = name.rfind('.');
      if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) {
        return InvalidArgumentError(where + ": '" + name + "' is not \"module.name\"");
      }
      // A rules file must not be a way to wave code execution through.
      if (IsDangerousGlobal(name.substr(0, dot), name.substr(dot + 1))) {
        return InvalidArgumentError(where + ": '" + name + "' can run code or reach the system; it cannot be "
                                    "allowlisted");
      }
      out.allowed_globals.insert(name);
    }
  }
  return out;
}

bool ValidationReport::failed() const {
  for (const ValidationFinding& f : findings) {
    if (f.severity == RuleSeverity::kError) return true;
  }
  return false;
}

RuleSeverity FindingSink::Severity(std::string_view rule) const {
  auto it = o_.severities.find(std::string(rule));
  if (it != o_.severities.end()) return it->second;
  for (const RuleInfo& info : ValidationRules()) {
    if (info.id == rule) return info.default_severity;
  }
  return RuleSeverity::kError;
}

void FindingSink::Add(std::string_view rule, std::string path, std::string message, std::string global) {
  RuleSeverity s = Severity(rule);
  if (s == RuleSeverity::kOff) return;
  r_.findings.push_back({std::string(rule), s, std::move(path), std::move(message), std::move(global)});
}

// The security findings of the torch layer under validate's rule ids.
void AddSecurityFindings(const std::vector<Finding>& findings, FindingSink& sink) {
  std::map<std::string, size_t> allowlisted;
  for (const Finding& f : findings) {
    if (!f.global.empty() && f.code != "dangerous-global" && sink.options().allowed_globals.count(f.global)) {
      ++allowlisted[f.global];
      continue;
    }
    // inspect's finding codes are validate's rule ids; the findings about a
    // pickle inside a bytes value (it, what it imports, that it could not be
    // read) all fall under nested-pickle, as inspect reports them.
    std::string rule = RuleHas(f.code, kSecurityFinding) ? f.code
                       : f.code == "nested-global" || f.code == "nested-pickle-unreadable" ? "nested-pickle"
                                                                                            : "";
    if (!rule.empty()) sink.Add(rule, f.where, f.message, f.global);
  }
  for (const auto& [name, n] : allowlisted) {
    sink.report().allowlisted.push_back(name + " (" + std::to_string(n) + (n == 1 ? " reference)" : " references)"));
  }
}

}  // namespace optstate
