// `optstate inspect DIR` for a DCP checkpoint: the metadata, the data files,
// how each tensor is chunked across them, then the rebuilt object (from
// planner_data) summarised exactly as for a single torch.save file.
#include <iomanip>
#include <sstream>

#include "inspect_command.h"
#include "optstate/dcp.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "inspect";

// "[0:5, 0:6]": a chunk's box in slice notation.
std::string BoxText(const DcpChunk& c) {
  std::string s = "[";
  for (size_t d = 0; d < c.offsets.size(); ++d) {
    s += (d ? ", " : "") + std::to_string(c.offsets[d]) + ":" + std::to_string(c.offsets[d] + c.sizes[d]);
  }
  return s + "]";
}

uint64_t TotalBytes(const DcpCheckpoint& dcp) {
  uint64_t total = dcp.metadata_bytes();
  for (const DcpDataFile& f : dcp.files()) total += f.size;
  return total;
}

void WriteDcpText(const InspectOptions& o, const DcpCheckpoint& dcp, const DcpGraph& g, const InspectReport& r,
                  std::ostream& out) {
  const DcpMetadata& md = dcp.metadata();
  const ConsolidateReport& n = g.counts;
  out << o.path << "\n";
  out << "  format    DCP checkpoint directory, " << md.entries.size() << " entries: " << n.tensors
      << " tensors in " << n.chunks << " chunks (" << HumanBytes(n.tensor_bytes) << "), " << n.bytes_items
      << " other values\n";
  out << "  metadata  .metadata, pickle protocol " << md.pickle_protocol << ", " << HumanBytes(dcp.metadata_bytes())
      << (md.checkpoint_id.empty() ? "" : ", checkpoint_id " + md.checkpoint_id)
      << (md.version.empty() ? "" : ", version " + md.version) << "\n";
  out << "  files     " << dcp.files().size() << " data files, " << HumanBytes(TotalBytes(dcp)) << " in all\n";
  for (const DcpDataFile& f : dcp.files()) {
    out << "    " << std::left << std::setw(20) << f.name << std::right << std::setw(12) << HumanBytes(f.size)
        << std::setw(7) << f.items << " items\n";
  }
  out << "\nchunks (global shape; each chunk's box and file):\n";
  size_t shown = 0, tensors = 0;
  for (const DcpEntry& e : md.entries) {
    if (!e.is_tensor) continue;
    if (++tensors > o.report.max_items * 4) continue;
    ++shown;
    std::ostringstream line;
    line << "  " << e.fqn << "  " << GetDTypeInfo(e.dtype).name << " " << ShapeText(e.size) << " ";
    if (e.chunks.size() == 1 && e.chunks[0].numel() == e.numel()) {
      line << " whole in " << e.chunks[0].where.relative_path;
    } else {
      for (const DcpChunk& c : e.chunks) line << " " << BoxText(c) << " " << c.where.relative_path;
    }
    out << line.str() << "\n";
  }
  if (tensors > shown) out << "  ... " << tensors - shown << " more tensors (--json lists them all)\n";
  WriteContentsText(o, g.checkpoint, r, out);
}

nlohmann::ordered_json DcpJson(const InspectOptions& o, const DcpCheckpoint& dcp, const DcpGraph& g,
                               const InspectReport& r) {
  using J = nlohmann::ordered_json;
  const DcpMetadata& md = dcp.metadata();
  J doc;
  doc["file"] = o.path;
  doc["format"] = "dcp";
  doc["file_size"] = TotalBytes(dcp);
  doc["pickle"] = {{"record", ".metadata"}, {"protocol", md.pickle_protocol}, {"bytes", dcp.metadata_bytes()},
                   {"globals", J::array()}};
  for (const GlobalRef& ref : md.globals) {
    doc["pickle"]["globals"].push_back({{"module", ref.module}, {"name", ref.name}, {"offset", ref.offset}});
  }
  J& d = doc["dcp"];
  d["checkpoint_id"] = md.checkpoint_id;
  d["save_id"] = md.save_id;
  d["version"] = md.version.empty() ? J(nullptr) : J(md.version);
  d["files"] = J::array();
  for (const DcpDataFile& f : dcp.files()) {
    d["files"].push_back({{"name", f.name}, {"size", f.size}, {"items", f.items}, {"item_bytes", f.item_bytes}});
  }
  d["entries"] = J::array();
  for (const DcpEntry& e : md.entries) {
    J path = J::array();
    for (const DcpPathPart& p : e.path) path.push_back(p.is_index ? J(p.index) : J(p.key));
    J entry = {{"key", e.fqn}, {"path", path}, {"kind", e.is_tensor ? "tensor" : "bytes"}};
    auto where = [](const DcpLocation& w) {
      return J{{"file", w.relative_path}, {"offset", w.offset}, {"length", w.length}};
    };
    if (e.is_tensor) {
      entry["dtype"] = GetDTypeInfo(e.dtype).name;
      entry["size"] = e.size;
      entry["chunks"] = J::array();
      for (const DcpChunk& c : e.chunks) {
        entry["chunks"].push_back({{"offsets", c.offsets}, {"sizes", c.sizes}, {"where", where(c.where)}});
      }
    } else {
      entry["where"] = where(e.bytes_where);
    }
    d["entries"].push_back(std::move(entry));
  }
  AddContentsJson(o, g.checkpoint, r, doc);
  return doc;
}

}  // namespace

int RunInspectDcp(const InspectOptions& o, CommandOutput& output) {
  DcpMetadataLimits limits;
  limits.pickle = o.read.pickle;
  auto dcp = OpenDcpCheckpoint(o.path, limits);
  if (!dcp.ok()) return ReportError(output, kName, dcp.status(), o.json);
  auto graph = BuildDcpGraph(**dcp, ConsolidateKeys::kFqn, o.read);
  if (!graph.ok()) return ReportError(output, kName, graph.status(), o.json);
  TensorBytesReader read = [&](const TensorRef& t) { return ReadDcpTensor(**dcp, *graph, t, o.read); };
  auto report = BuildInspectReport(graph->checkpoint, read, o.report);
  if (!report.ok()) return ReportError(output, kName, std::move(report).status().WithContext(o.path), o.json);
  if (o.json) {
    WriteJson(output, DcpJson(o, **dcp, *graph, *report));
  } else {
    WriteDcpText(o, **dcp, *graph, *report, output.out);
  }
  return kExitOk;
}

}  // namespace optstate::tools
