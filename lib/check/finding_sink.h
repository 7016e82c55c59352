// Where the validate rules put what they find: each finding at the severity
// the rules file gives its rule (dropped when the file turns the rule off).
// Defined in validate_rules.cc, beside the catalogue of default severities.
#ifndef OPTSTATE_CHECK_FINDING_SINK_H_
#define OPTSTATE_CHECK_FINDING_SINK_H_

#include <string>
#include <string_view>

#include "optstate/validate.h"

namespace optstate {

class FindingSink {
 public:
  FindingSink(const ValidateOptions& options, ValidationReport& report) : o_(options), r_(report) {}

  RuleSeverity Severity(std::string_view rule) const;
  // Dropped when the rules file turns the rule off.
  void Add(std::string_view rule, std::string path, std::string message, std::string global = "");

  const ValidateOptions& options() const { return o_; }
  ValidationReport& report() { return r_; }

 private:
  const ValidateOptions& o_;
  ValidationReport& r_;
};

// The rules that judge what a pickle names, calls and how it is built: the
// only ones that can look at a file that cannot be read as a checkpoint.
bool JudgesPickles(std::string_view rule);

}  // namespace optstate

#endif  // OPTSTATE_CHECK_FINDING_SINK_H_
