// `optstate validate` of a DeepSpeed ZeRO directory, as one save: what the
// rank files say about each other and about the model states. Each file's own
// rules (values, pickles, CRCs) are that file's Validate.
#include "optstate/validate.h"
#include "optstate/zero_checkpoint.h"

#include "check/finding_sink.h"

namespace optstate {
namespace {

const char* RuleOf(const std::string& kind) {
  if (kind == "missing-file" || kind == "file") return "zero-rank-files";
  if (kind == "steps-differ" || kind == "groups-differ") return "zero-ranks-agree";
  return "zero-layout";  // tiling, partition-size
}

}  // namespace

StatusOr<ValidationReport> ValidateZeroDirectory(const std::string& tag_dir, const ValidateOptions& o) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<ZeroCheckpoint> zero, OpenZeroCheckpoint(tag_dir, o.read));
  ValidationReport r;
  r.input = tag_dir;
  r.format = "deepspeed-zero";
  for (const char* id : {"zero-rank-files", "zero-layout", "zero-ranks-agree"}) r.checked.emplace_back(id);
  FindingSink sink(o, r);
  for (const ZeroLayoutProblem& p : zero->problems) sink.Add(RuleOf(p.kind), p.where, p.message);
  return r;
}

}  // namespace optstate
