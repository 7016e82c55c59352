// What the files behind `optstate validate` share: findings recorded at the
// severity the rules file gives, and the rules that need the parameter list.
#ifndef OPTSTATE_VALIDATE_INTERNAL_H_
#define OPTSTATE_VALIDATE_INTERNAL_H_

#include <string>
#include <string_view>

#include "optstate/validate.h"

namespace optstate {

class FindingSink {
 public:
  FindingSink(const ValidateOptions& options, ValidationReport& report) : o_(options), r_(report) {}

  RuleSeverity Severity(std::string_view rule) const;
  // Dropped when the rules file turns the rule off.
  void Add(std::string_view rule, std::string path, std::string message);

  const ValidateOptions& options() const { return o_; }
  ValidationReport& report() { return r_; }

 private:
  const ValidateOptions& o_;
  ValidationReport& r_;
};

// The rules marked needs_params, on the optimizer state of `checkpoint` (read
// from `path`, a file or a DCP directory). The parameters come from
// --manifest, --model, or the checkpoint's own model entry. Counts are
// compared first (they need no order); the matching rules run only when the
// parameter order can be decided. Every rule not run is listed as skipped with
// the reason. Errors: a --manifest or --model that cannot be read.
Status CheckAgainstParams(const Checkpoint& checkpoint, const std::string& path, FindingSink& sink);

}  // namespace optstate

#endif  // OPTSTATE_VALIDATE_INTERNAL_H_
