// `optstate inspect FILE FILE...`: the per-rank files of one sharded save. The
// layout is checked as unshard checks it (every DTensor's shards tile it at
// the ranks' mesh coordinates), then each rank's file is reported as a single
// file is: a rank's pickle can hold what another's does not, so none is skipped.
#include <algorithm>
#include <memory>
#include <sstream>

#include "inspect_command.h"
#include "optstate/torch_objects.h"
#include "optstate/unshard.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "inspect";

void WriteLayoutText(const RankSetLayout& layout, size_t max_items, std::ostream& out) {
  if (layout.dtensors.empty()) {
    out << layout.files.size() << " files, no DTensors in rank 0's: nothing says they are shards of one save (for\n"
        << "`.to_local()` copies the placements are gone); each file is shown, in rank order\n";
    for (size_t r = 0; r < layout.files.size(); ++r) out << "  rank " << r << "  " << layout.files[r] << "\n";
    return;
  }
  out << "sharded save of " << layout.files.size() << " ranks: " << layout.dtensors.size()
      << " DTensors, each tiled once by the ranks' shards at their mesh coordinates\n";
  for (size_t r = 0; r < layout.files.size(); ++r) out << "  rank " << r << "  " << layout.files[r] << "\n";
  size_t width = 0;
  for (const auto& d : layout.dtensors) width = std::max(width, d.path.size());
  size_t shown = 0;
  for (const auto& d : layout.dtensors) {
    if (shown++ == max_items) {
      out << "  ... (" << layout.dtensors.size() << " in all; --max-items or --json shows more)\n";
      break;
    }
    const std::string& path = d.path;
    out << "  " << path << std::string(width - path.size() + 2, ' ') << GetDTypeInfo(d.dtype).name << " "
        << ShapeText(d.global_sizes) << " as " << PlacementsText(d.placements) << " on mesh " << ShapeText(d.mesh_shape);
    if (d.replicas > 0) out << " (" << d.replicas << " ranks hold copies)";
    out << "\n";
  }
  out << "  other tensors: " << layout.plain_tensors << ", taken from rank 0 by unshard";
  if (layout.rank_local.empty()) {
    out << "; the same bytes on every rank\n";
  } else {
    out << "; " << layout.rank_local.size() << " differ between ranks (per-rank values, not the whole of anything):\n";
    for (const std::string& p : layout.rank_local) out << "    " << p << "\n";
  }
}

}  // namespace

int RunInspectRankSet(const InspectOptions& options, CommandOutput& output) {
  StatusOr<RankSetLayout> layout = CheckRankSetLayout(options.paths, options.read);
  if (!layout.ok()) return ReportError(output, kName, layout.status(), options.json);
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  std::ostringstream text;
  WriteLayoutText(*layout, options.report.max_items, text);
  for (size_t r = 0; r < layout->files.size(); ++r) {
    InspectOptions one = options;
    one.path = layout->files[r];
    ReadOptions read = options.read;
    read.resolve_offsets = options.records;
    StatusOr<std::unique_ptr<CheckpointFile>> file = OpenCheckpoint(one.path, read);
    if (!file.ok()) return ReportError(output, kName, file.status(), options.json);
    StatusOr<InspectReport> report = BuildInspectReport(**file, one.report);
    if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(one.path), options.json);
    if (options.json) {
      ranks.push_back(InspectJson(one, (*file)->checkpoint(), *report));
    } else {
      text << "\n== rank " << r << " ==\n";
      WriteInspectText(one, (*file)->checkpoint(), *report, text);
    }
  }
  if (!options.json) {
    output.out << text.str();
    return kExitOk;
  }
  nlohmann::ordered_json dtensors = nlohmann::ordered_json::array();
  for (const auto& d : layout->dtensors) {
    dtensors.push_back({{"path", d.path}, {"dtype", GetDTypeInfo(d.dtype).name}, {"global_shape", d.global_sizes},
                        {"placements", d.placements}, {"mesh_shape", d.mesh_shape}, {"replicas", d.replicas}});
  }
  WriteJson(output, {{"rank_set", {{"files", layout->files}, {"dtensors", dtensors},
                                   {"plain_tensors", layout->plain_tensors},
                                   {"rank_local_tensors", layout->rank_local}}},
                     {"ranks", ranks}});
  return kExitOk;
}

}  // namespace optstate::tools
