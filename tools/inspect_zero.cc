// `optstate inspect` of a DeepSpeed ZeRO directory: the stage, the ranks and
// their files, each group's partitions and padding, where every parameter's
// pieces lie, and what does not add up.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "inspect_command.h"
#include "optstate/validate.h"
#include "optstate/zero.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "inspect";

std::string BaseName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string StepText(double step) {
  if (std::isnan(step)) return "none";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", step);
  return buf;
}

nlohmann::ordered_json ParamJson(const ZeroParam& p) {
  nlohmann::ordered_json frags = nlohmann::ordered_json::array();
  for (const ZeroFragment& f : p.fragments) {
    frags.push_back({{"rank", f.rank}, {"offset", f.offset}, {"param_offset", f.param_offset}, {"numel", f.numel}});
  }
  return {{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"fragments", frags}};
}

nlohmann::ordered_json ZeroJson(const std::string& input, const ZeroCheckpoint& z) {
  using J = nlohmann::ordered_json;
  J ranks = J::array();
  for (uint32_t r = 0; r < z.world_size; ++r) {
    const ZeroRank& rank = z.ranks[r];
    ranks.push_back({{"rank", r},
                     {"optimizer_file", rank.optim_path.empty() ? J(nullptr) : J(rank.optim_path)},
                     {"model_file", rank.model_path.empty() ? J(nullptr) : J(rank.model_path)},
                     {"readable", rank.optim != nullptr}});
  }
  J groups = J::array();
  for (size_t g = 0; g < z.groups.size(); ++g) {
    const ZeroGroup& group = z.groups[g];
    J params = J::array();
    for (size_t pi : group.params) params.push_back(ParamJson(z.params[pi]));
    J steps = J::array();
    for (const ZeroRank& rank : z.ranks) {
      steps.push_back(g < rank.steps.size() && !std::isnan(rank.steps[g]) ? J(rank.steps[g]) : J(nullptr));
    }
    groups.push_back({{"index", g},
                      {"partition_numel", group.partition_numel},
                      {"padding", group.padding},
                      {"state_fields", group.state_fields},
                      {"steps", steps},
                      {"params", params}});
  }
  J frozen = J::array();
  for (const ZeroParam& p : z.params) {
    if (p.group < 0) frozen.push_back(ParamJson(p));
  }
  J problems = J::array();
  for (const ZeroLayoutProblem& p : z.problems) {
    problems.push_back({{"kind", p.kind}, {"where", p.where}, {"message", p.message}});
  }
  return {{"input", input},        {"format", "deepspeed-zero"}, {"directory", z.dir},
          {"zero_stage", z.stage}, {"bf16_optimizer", z.bf16_optimizer}, {"world_size", z.world_size},
          {"ds_version", z.ds_version},
          {"ranks", ranks},        {"groups", groups},           {"frozen", frozen},
          {"buffers", z.buffer_names}, {"problems", problems}};
}

void WriteZeroText(const std::string& input, const ZeroCheckpoint& z, std::ostream& out) {
  out << input << ": DeepSpeed ZeRO-" << z.stage << " checkpoint"
      << (z.bf16_optimizer ? " (BF16_Optimizer's partitions)" : "") << ", " << z.world_size << " data-parallel ranks"
      << (z.ds_version.empty() ? "" : ", saved by DeepSpeed " + OneLine(z.ds_version)) << "\n";
  out << "  directory " << z.dir << "\n";
  out << "  model states  " << BaseName(z.model->path()) << "\n";
  for (uint32_t r = 0; r < z.world_size; ++r) {
    const ZeroRank& rank = z.ranks[r];
    out << "  rank " << r << "  "
        << (rank.optim_path.empty() ? "MISSING optimizer file" : BaseName(rank.optim_path) +
                                                                     (rank.optim ? "" : " (unreadable)"));
    if (z.stage == 3 && r > 0) out << ", " << (rank.model_path.empty() ? "MISSING model states" : BaseName(rank.model_path));
    out << "\n";
  }
  for (size_t g = 0; g < z.groups.size(); ++g) {
    const ZeroGroup& group = z.groups[g];
    uint64_t numel = 0;
    for (size_t pi : group.params) numel += z.params[pi].numel;
    std::string sizes, pads, steps;
    for (uint32_t r = 0; r < z.world_size; ++r) {
      sizes += (r ? ", " : "") + std::to_string(group.partition_numel[r]);
      pads += (r ? ", " : "") + std::to_string(group.padding[r]);
      steps += (r ? ", " : "") + StepText(r < z.ranks.size() && g < z.ranks[r].steps.size() ? z.ranks[r].steps[g]
                                                                                             : std::nan(""));
    }
    out << "  group " << g << ": " << group.params.size() << " parameters, " << numel << " elements; partitions ["
        << sizes << "], padding [" << pads << "], steps [" << steps << "]\n";
    for (size_t pi : group.params) {
      const ZeroParam& p = z.params[pi];
      out << "    " << OneLine(p.name) << " " << ShapeText(p.shape) << ":";
      for (const ZeroFragment& f : p.fragments) {
        out << " rank " << f.rank << " [" << f.offset << ", " << f.offset + f.numel << ")";
      }
      out << "\n";
    }
  }
  for (const ZeroParam& p : z.params) {
    if (p.group >= 0) continue;
    out << "  frozen " << OneLine(p.name) << " " << ShapeText(p.shape) << ": "
        << (z.stage == 3 ? "cut across the ranks' model states" : "whole in the model states") << "\n";
  }
  if (!z.buffer_names.empty()) out << "  buffers " << z.buffer_names.size() << "\n";
  if (z.problems.empty()) {
    out << "  layout: every parameter's pieces tile it once; every rank file present\n";
  } else {
    out << "  " << z.problems.size() << " layout problem" << (z.problems.size() == 1 ? "" : "s") << ":\n";
    for (const ZeroLayoutProblem& p : z.problems) out << "    " << p.kind << "  " << OneLine(p.where) << ": " << OneLine(p.message) << "\n";
  }
}

}  // namespace

int RunInspectZero(const InspectOptions& o, const std::string& tag_dir, CommandOutput& output) {
  auto zero = OpenZeroCheckpoint(tag_dir, o.read);
  if (!zero.ok()) return ReportError(output, kName, zero.status(), o.json);
  if (o.json) {
    WriteJson(output, ZeroJson(o.path, **zero));
  } else {
    WriteZeroText(o.path, **zero, output.out);
  }
  return kExitOk;
}

}  // namespace optstate::tools
