// validate on the per-rank files of one sharded save: each rank validated on
// its own, the reports merged, and the ranks compared with each other.
#include <map>
#include <set>

#include "check/finding_sink.h"
#include "optstate/collisions.h"
#include "optstate/validate.h"

namespace optstate {
namespace {

std::string RanksText(const std::vector<size_t>& ranks, size_t all) {
  if (ranks.size() == all) return "every rank";
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

StatusOr<ValidationReport> ValidateRankSet(const std::vector<std::string>& given,
                                           const std::vector<std::string>& given_models, const ValidateOptions& o) {
  OPTSTATE_ASSIGN_OR_RETURN(std::vector<std::string> files, OrderByRank(given));
  std::vector<std::string> models;
  if (!given_models.empty()) {
    OPTSTATE_ASSIGN_OR_RETURN(models, OrderByRank(given_models));
    if (models.size() != files.size()) {
      return InvalidArgumentError(std::to_string(files.size()) + " checkpoint files but " +
                                  std::to_string(models.size()) + " --model files: give one per rank");
    }
  }
  std::vector<ValidationReport> reports;
  for (size_t r = 0; r < files.size(); ++r) {
    ValidateOptions vr = o;
    if (!models.empty()) {
      ParamSource p = o.params.value_or(ParamSource{});
      p.model = models[r];
      vr.params = p;
    }
    StatusOr<ValidationReport> one = Validate(files[r], vr);
    if (!one.ok()) return std::move(one).status().WithContext("rank " + std::to_string(r));
    reports.push_back(std::move(*one));
  }

  ValidationReport merged;
  merged.input = "rank set of " + std::to_string(files.size()) + " files (" + files[0] + " ... " + files.back() + ")";
  merged.format = reports[0].format;
  // Findings: one line per distinct finding, naming the ranks it is on.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<size_t>> ranks_of;
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, RuleSeverity>> order;
  for (size_t r = 0; r < reports.size(); ++r) {
    merged.value_bytes += reports[r].value_bytes;
    for (const std::string& a : reports[r].allowlisted) {
      const std::string each = (files.size() > 1 ? "rank " + std::to_string(r) + ": " : "") + a;
      merged.allowlisted.push_back(each);
    }
    for (const ValidationFinding& f : reports[r].findings) {
      auto key = std::make_tuple(f.rule, f.path, f.message);
      auto [it, fresh] = ranks_of.emplace(key, std::vector<size_t>{});
      if (fresh) order.emplace_back(key, f.severity);
      it->second.push_back(r);
    }
  }
  for (auto& [key, severity] : order) {
    const auto& [rule, path, message] = key;
    merged.findings.push_back({rule, severity, RanksText(ranks_of[key], files.size()) + ": " + path, message, ""});
  }
  // A rule is checked for the set when it ran on every rank.
  for (const std::string& id : reports[0].checked) {
    bool everywhere = true;
    for (const ValidationReport& r : reports) {
      everywhere &= std::find(r.checked.begin(), r.checked.end(), id) != r.checked.end();
    }
    if (everywhere) merged.checked.push_back(id);
  }
  std::set<std::string> listed(merged.checked.begin(), merged.checked.end());
  for (size_t r = 0; r < reports.size(); ++r) {
    for (const auto& [id, why] : reports[r].skipped) {
      if (listed.insert(id).second) merged.skipped.emplace_back(id, (files.size() > 1 ? "rank " + std::to_string(r) + ": " : "") + why);
    }
  }

  // The ranks against each other.
  FindingSink sink(o, merged);
  const ParamSource p = o.params.value_or(ParamSource{});
  if (models.empty() && p.manifest.empty()) {
    merged.skipped.emplace_back("rank-set-mismatch", "give --model once per rank (or --manifest) to compare the ranks");
  } else {
    RankSetSource source{files, models, p.manifest, p.model_key};
    StatusOr<RankSetMatch> set = OpenAndMatchRankSet(source, "", o.read, MatchOptions{});
    merged.checked.emplace_back("rank-set-mismatch");
    if (!set.ok()) sink.Add("rank-set-mismatch", "ranks", std::string(set.status().message()));
  }
  return merged;
}

}  // namespace optstate
