// `optstate validate` of a DeepSpeed ZeRO directory, as one save: what the
// rank files say about each other and about the model states. Each file's own
// rules (values, pickles, CRCs) are that file's Validate.
#include "optstate/validate.h"
#include "optstate/zero.h"

#include "check/finding_sink.h"
#include "check/value_scan.h"
#include "optstate/file_io.h"

namespace optstate {
namespace {

const char* RuleOf(const std::string& kind) {
  if (kind == "missing-file" || kind == "file") return "zero-rank-files";
  if (kind == "steps-differ" || kind == "groups-differ") return "zero-ranks-agree";
  return "zero-layout";  // tiling, partition-size
}

// The fp32 master weights are no optimizer state, so no file's own rules read
// them; they are what training resumes from. Scanned in place, both cores,
// nothing held (value_scan's pread path).
void CheckMasterWeights(const ZeroCheckpoint& z, ValidationReport& r, FindingSink& sink) {
  struct Where {
    const CheckpointFile* file;
    size_t group;
  };
  std::vector<ScanRange> ranges;
  std::vector<Where> where;
  for (const ZeroRank& rank : z.ranks) {
    if (!rank.optim) continue;
    const Checkpoint& cp = rank.optim->checkpoint();
    for (size_t g = 0; g < rank.fp32_partitions.size(); ++g) {
      NodeId n = rank.fp32_partitions[g];
      if (n == kNoNode) continue;
      const TensorRef& t = cp.tensors[cp.graph.at(n).tensor];
      StatusOr<std::optional<ByteSpan>> span = TensorBytesInPlace(rank.optim->bytes(), cp, t);
      if (!span.ok() || !*span) continue;  // a layout problem already says why
      ranges.push_back(ScanRange{**span, t.dtype, {}});
      where.push_back({rank.optim.get(), g});
    }
  }
  std::vector<ScanRecord> records;
  ScanHooks hooks;
  hooks.locate = [&z](ByteSpan range) -> std::optional<FileRange> {
    for (const ZeroRank& rank : z.ranks) {
      if (!rank.optim) continue;
      ByteSpan all = rank.optim->bytes();
      if (range.data() >= all.data() && range.data() + range.size() <= all.data() + all.size()) {
        return rank.optim->FileRangeOf(range);
      }
    }
    return std::nullopt;
  };
  ScanRecordsAndRanges(records, ranges, hooks);
  for (size_t i = 0; i < ranges.size(); ++i) {
    r.value_bytes += ranges[i].bytes.size();
    if (ranges[i].counts.nonfinite == 0) continue;
    const size_t n = ranges[i].bytes.size() / GetDTypeInfo(ranges[i].dtype).element_size;
    sink.Add("non-finite", where[i].file->path() + ": group " + std::to_string(where[i].group) + " fp32 master weights",
             std::to_string(ranges[i].counts.nonfinite) + " of " + std::to_string(n) +
                 " values are NaN or infinite: training resumes from these weights.");
  }
}

}  // namespace

StatusOr<ValidationReport> ValidateZeroDirectory(const std::string& tag_dir, const ValidateOptions& o) {
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<ZeroCheckpoint> zero, OpenZeroCheckpoint(tag_dir, o.read));
  ValidationReport r;
  r.input = tag_dir;
  r.format = "deepspeed-zero";
  for (const char* id : {"zero-rank-files", "zero-layout", "zero-ranks-agree"}) r.checked.emplace_back(id);
  if (o.scan_values) {
    r.checked.emplace_back("non-finite");
  } else {
    r.skipped.emplace_back("non-finite", "--no-values");
  }
  FindingSink sink(o, r);
  for (const ZeroLayoutProblem& p : zero->problems) sink.Add(RuleOf(p.kind), p.where, p.message);
  if (o.scan_values) CheckMasterWeights(*zero, r, sink);
  if (CancellationRequested()) return CancelledError(tag_dir + ": validate cancelled");
  return r;
}

}  // namespace optstate
