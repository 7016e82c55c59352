// The rule catalogue and rules files: ids, default severities, parsing, and
// the sink that records findings at the severity they give.
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "check/finding_sink.h"
#include "check/validate_checkpoint.h"
#include "optstate/validate.h"

#include "optstate/security.h"

namespace optstate {

std::string_view RuleSeverityName(RuleSeverity s) {
  switch (s) {
    case RuleSeverity::kOff: return "off";
    case RuleSeverity::kInfo: return "info";
    case RuleSeverity::kWarning: return "warning";
    case RuleSeverity::kError: return "error";
  }
  return "error";
}

std::optional<RuleSeverity> RuleSeverityFromName(std::string_view name) {
  for (RuleSeverity s : {RuleSeverity::kOff, RuleSeverity::kInfo, RuleSeverity::kWarning, RuleSeverity::kError}) {
    if (RuleSeverityName(s) == name) return s;
  }
  return std::nullopt;
}

namespace {

// The rules that read optimizer state: with none in the file they saw nothing,
// so they are reported as skipped, never as checked.
std::vector<RuleInfo> WithOptimizerRulesMarked(std::vector<RuleInfo> rules) {
  for (RuleInfo& r : rules) {
    for (std::string_view id : {"state-keys-not-canonical", "param-group-duplicate", "state-without-param",
                                "param-without-state", "steps-differ-in-group", "lr-zero-with-steps",
                                "lr-zero-after-schedule", "untrained-init-state", "state-zero-after-steps", "non-finite", "negative-exp-avg-sq",
                                "state-tensors-alias", "state-step-shared"}) {
      r.needs_optimizer |= r.id == id;
    }
  }
  return rules;
}

}  // namespace

const std::vector<RuleInfo>& ValidationRules() {
  using S = RuleSeverity;
  static const std::vector<RuleInfo> kRules = WithOptimizerRulesMarked({
      {"state-keys-not-canonical", S::kError,
       "optimizer state keyed by something torch.optim does not map to parameters (pointer tuples, bare "
       "pointers, (Parameter, i), string indices, tensors)"},
      {"param-group-duplicate", S::kError, "a parameter listed twice in param_groups"},
      {"state-without-param", S::kWarning, "a state entry whose key names no parameter in param_groups"},
      {"param-without-state", S::kInfo, "a parameter in param_groups without a state entry (frozen, or never stepped)"},
      {"steps-differ-in-group", S::kWarning, "state entries of one param group at different step counts"},
      {"lr-zero-with-steps", S::kError,
       "a param group with lr == 0 whose state has taken steps and no scheduler's initial_lr (the lr=0 leak of DCP's "
       "init step)"},
      {"lr-zero-after-schedule", S::kWarning,
       "lr == 0 after steps in a group a scheduler started (initial_lr), without scheduler state in the file saying "
       "the schedule ended at 0"},
      {"untrained-init-state", S::kWarning,
       "every step is 1 and every moment is zero: state made by DCP's init step, never trained", true},
      {"state-zero-after-steps", S::kWarning,
       "a state entry at step 2 or more whose moments are all zero: reset or zeroed after training (loads, but cold)",
       true},
      {"state-tensors-alias", S::kError,
       "two optimizer state tensors saved as the same bytes (exp_avg is exp_avg_sq): torch.load keeps them one "
       "tensor, and the file holds one set of values where there were two"},
      {"state-step-shared", S::kInfo,
       "one step tensor saved for several entries (FSDP.optim_state_dict of a flat parameter): torch.optim's "
       "load_state_dict would count each step once per entry"},
      {"non-finite", S::kError, "NaN or infinity in optimizer state (and in a ZeRO directory's fp32 master weights)", true},
      {"negative-exp-avg-sq", S::kError, "negative values in exp_avg_sq (impossible for Adam)", true},
      {"dangerous-global", S::kError, "a pickle names a callable that runs code or reaches the system"},
      {"torchscript-archive", S::kError,
       "a zip holding constants.pkl: torch.load hands it to torch.jit.load, which runs TorchScript code optstate "
       "does not read"},
      {"allocation-claim", S::kError,
       "a pickle call that allocates what a number names, far beyond the file (builtins.bytearray(n), which even "
       "weights_only=True runs)"},
      {"pickle-tampered", S::kError,
       "pickle structure no pickler writes and readers disagree on: a PROTO that is not first or comes twice, a "
       "FRAME that ends inside an opcode, objects left beneath the result at STOP"},
      {"pickle-expansion", S::kError,
       "shared objects that expand to more than 64 objects per byte of the file as a tree (memo or DUP expansion, "
       "\"billion laughs\")"},
      {"pickle-cycle", S::kInfo,
       "an object that contains itself (torch 1.13's OneCycleLR state does): torch.load reads it, but code that "
       "walks the result without a memo never ends"},
      {"resource-limit", S::kError,
       "a pickle past one of optstate's built-in limits (objects, depth, memo, one string's size): the file is not "
       "read, and the claim is reported"},
      {"import-runs-code", S::kError,
       "a pickle names a global of a module whose import alone runs code (a package's __main__, this, antigravity): "
       "resolving it does, called or not"},
      {"unknown-global-called", S::kError,
       "a pickle calls a global that is neither on torch 2.6's weights_only allowlist nor a known data class "
       "(default-deny)"},
      {"global-not-allowlisted", S::kWarning,
       "a global outside torch 2.6's weights_only allowlist that only builds data (numpy arrays, containers, "
       "dates, BytesIO, ...) or is named but never called"},
      {"nested-pickle", S::kWarning, "a pickle hidden in a bytes value (unpickled by whoever loads that value)"},
      {"zip-name-escapes", S::kError, "a zip entry named with '..' or an absolute path (unzip would write outside)"},
      {"zip-duplicate-record", S::kError,
       "two zip records of one name: torch 2.6 reads the first, 1.13 the last (each scanned all the same)"},
      {"crc-mismatch", S::kError, "a zip record whose bytes do not match its CRC-32 (CRC 0: not recorded, see crc-not-recorded)", true},
      {"crc-not-recorded", S::kInfo,
       "zip records whose CRC-32 is 0, as torch.serialization.set_crc32_options(False) writes them: loadable, but "
       "their bytes cannot be checked for corruption", true},
      {"tensor-data-skipped", S::kError,
       "every storage record zeros with no CRC-32: saved under torch.serialization.skip_data(), structure without "
       "values", true},
      {"dcp-chunk-layout", S::kError, "DCP chunks that overlap, leave gaps or reach outside their tensor"},
      {"param-count-mismatch", S::kError,
       "param_groups list more parameters than the model has, names it lacks, or other counts or group sizes "
       "than the manifest",
       false, true},
      {"model-params-not-in-optimizer", S::kWarning,
       "model parameters in no param group (frozen for fine-tuning, or state from another model)", false, true},
      {"model-entries-not-optimized", S::kInfo,
       "model tensors that param_groups, naming every parameter by FQN, leave out: buffers a state dict does not "
       "mark (rotary tables) or frozen parameters; the names match, so not another model's state",
       false, true},
      {"state-collision", S::kError,
       "parameters whose state was merged into one entry (HeavyBall under FSDP: every data_ptr 0)", false, true},
      {"state-orphan", S::kWarning, "state entries of no parameter (freed temporaries)", false, true},
      {"state-shape-mismatch", S::kError, "state tensors whose shape does not fit their parameter", false, true},
      {"state-schema-unknown", S::kInfo,
       "state fields of an optimizer (or fields of a known one) optstate does not know: their shapes were not held "
       "to the parameters'", false, true},
      {"rank-set-mismatch", S::kError,
       "per-rank files of one sharded save that disagree: parameters, global shapes, state keys, or shards that do "
       "not tile a tensor once",
       false, false, true},
      {"zero-rank-files", S::kError,
       "a DeepSpeed ZeRO directory missing a rank's optimizer (or, stage 3, model states) file, or one unreadable",
       false, false, true},
      {"zero-layout", S::kError,
       "ZeRO partitions that do not tile the parameters the model states list: sizes, param_slice_mappings or "
       "paddings that disagree with the shapes",
       false, false, true},
      {"zero-ranks-agree", S::kError, "ZeRO rank files at different steps or with different group hyperparameters",
       false, false, true},
  });
  return kRules;
}

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
    static const std::set<std::string, std::less<>> kSameId = {
        "dangerous-global", "global-not-allowlisted", "import-runs-code", "allocation-claim",
        "torchscript-archive", "unknown-global-called", "zip-name-escapes", "zip-duplicate-record",
        "nested-pickle", "pickle-tampered", "pickle-expansion", "pickle-cycle", "resource-limit"};
    std::string rule = kSameId.count(f.code) ? f.code
                       : f.code == "nested-global" || f.code == "nested-pickle-unreadable" ? "nested-pickle"
                                                                                            : "";
    if (!rule.empty()) sink.Add(rule, f.where, f.message, f.global);
  }
  for (const auto& [name, n] : allowlisted) {
    sink.report().allowlisted.push_back(name + " (" + std::to_string(n) + (n == 1 ? " reference)" : " references)"));
  }
}

}  // namespace optstate
