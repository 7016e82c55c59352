// Text and JSON renderings of an inspect report. Text is meant for a terminal:
// a header of container facts, the object tree, optimizer summaries, findings.
#include <iomanip>
#include <sstream>

#include "inspect_command.h"
#include "terminal_safe_stream.h"

namespace optstate::tools {
namespace {

std::string ContainerLine(const Checkpoint& cp) {
  const ContainerInfo& c = cp.container;
  std::string s;
  if (c.format == ContainerFormat::kZstd) {
    s = "zstd-compressed " + HumanBytes(c.file_size) + ", holding " +
        HumanBytes(c.zstd_content_size.value_or(0)) + " of ";
  }
  ContainerFormat inner = c.format == ContainerFormat::kZstd ? c.zstd_inner_format.value_or(ContainerFormat::kZip)
                                                             : c.format;
  if (inner == ContainerFormat::kLegacy) {
    s += "torch.save legacy format (torch < 1.6 or _use_new_zipfile_serialization=False)";
  } else if (inner == ContainerFormat::kSafetensors) {
    s += "safetensors (a JSON header and raw tensor data; no pickle, and no module order)";
  } else {
    s += "torch.save zip";
    s += c.byteorder ? ", byteorder " + *c.byteorder : " (no byteorder record: written by torch < 2.1)";
  }
  if (c.format != ContainerFormat::kZstd) s += ", " + HumanBytes(c.file_size);
  return s;
}

void WriteTree(const InspectReport& r, std::ostream& out) {
  std::vector<bool> last_at(64, false);
  for (const TreeLine& l : r.tree) {
    std::string prefix;
    for (uint32_t d = 1; d < l.depth && d < last_at.size(); ++d) prefix += last_at[d] ? "   " : "│  ";
    if (l.depth > 0) prefix += l.last ? "└─ " : "├─ ";
    if (l.depth < last_at.size()) last_at[l.depth] = l.last;
    out << prefix;
    if (l.more > 0) {
      out << "… " << l.more << " more\n";
      continue;
    }
    if (!l.label.empty()) out << OneLine(l.label) << ": ";
    if (!l.same_as.empty()) {
      out << "same " << l.type << " as " << OneLine(l.same_as) << "\n";
      continue;
    }
    bool scalar = l.type == "int" || l.type == "float" || l.type == "str" || l.type == "bool" ||
                  l.type == "None";
    bool tensor = l.type == "tensor" || l.type == "Parameter" || l.type == "DTensor";
    out << OneLine(scalar ? l.summary : l.type + (tensor ? " " : ", ") + l.summary) << "\n";
  }
}

void WriteWrapped(std::ostream& out, const std::string& head, const std::vector<std::string>& words,
                  size_t width = 100) {
  std::string indent(head.size(), ' ');
  std::string line = head;
  for (const std::string& w : words) {
    if (line.size() > head.size() && line.size() + 1 + w.size() > width) {  // wrap
      out << line << "\n";
      line = indent;
    }
    line += " ";
    line += w;
  }
  out << line << "\n";
}

void WriteOptimizer(const OptimizerSummary& o, std::ostream& out) {
  out << "\noptimizer state at " << (o.path.empty() ? "(root)" : OneLine(o.path)) << ":\n";
  std::string keys;
  for (auto& [type, n] : o.key_types) keys += (keys.empty() ? "" : ", ") + type + " ×" + std::to_string(n);
  out << "  state         " << o.state_entries << (o.state_entries == 1 ? " entry" : " entries")
      << (keys.empty() ? "" : ", keys " + keys)
      << (o.nested_views ? ", per-view layout {index: {view: {...}}}" : "") << "\n";
  out << "  param_groups  " << o.groups.size() << (o.groups.size() == 1 ? " group, " : " groups, ")
      << o.group_params << (o.group_params == 1 ? " param\n" : " params\n");
  size_t width = 4;
  for (const StateField& f : o.fields) width = std::max(width, f.name.size());
  bool first = true;
  for (const StateField& f : o.fields) {
    std::string types;
    for (const std::string& d : f.dtypes) types += (types.empty() ? "" : "/") + d;
    out << (first ? "  fields        " : "                ") << std::left << std::setw(static_cast<int>(width))
        << f.name << std::right << "  " << std::setw(5) << f.count << " × " << std::left << std::setw(10) << types
        << std::right << std::setw(10) << (f.bytes ? HumanBytes(f.bytes) : "");
    if (f.name == "step" && !o.step_values.empty()) {
      std::string v;
      for (const std::string& s : o.step_values) v += (v.empty() ? "" : ", ") + s;
      out << "  values " << v;
      if (o.steps_read < o.steps_total) {
        out << " (in the first " << o.steps_read << " of " << o.steps_total << ")";
      }
    }
    out << "\n";
    first = false;
  }
  for (size_t i = 0; i < o.groups.size(); ++i) {
    std::vector<std::string> words;
    for (auto& [k, v] : o.groups[i].hyperparameters) words.push_back(k + "=" + v);
    std::ostringstream head;
    head << "  group " << std::left << std::setw(7) << i << o.groups[i].params
         << (o.groups[i].params == 1 ? " param:" : " params:");
    WriteWrapped(out, head.str(), words);
  }
}

}  // namespace

void WriteInspectText(const InspectOptions& options, const Checkpoint& cp, const InspectReport& r,
                      std::ostream& out) {
  out << options.path << "\n";
  out << "  format    " << ContainerLine(cp) << "\n";
  if (cp.container.format == ContainerFormat::kSafetensors) {
    out << "  header    " << HumanBytes(cp.pickle_bytes) << " of JSON\n";
  } else {
    out << "  pickle    " << cp.pickle_record << ", protocol " << cp.pickle_protocol << ", "
        << HumanBytes(cp.pickle_bytes) << "\n";
  }
  out << "  tensors   " << r.tensors << " in " << cp.storages.size() << " storages, "
      << HumanBytes(r.storage_bytes) << " of data\n";
  const ContainerInfo& c = cp.container;
  if (c.format == ContainerFormat::kZip) {
    out << "  records   " << ZipRecordCount(c) << (c.crc_checked ? ", all CRC-32 verified" : "")
        << (c.version ? ", version " + *c.version : "")
        << (c.serialization_id ? ", serialization_id " + *c.serialization_id : "") << "\n";
    if (options.records) {
      const ZipListing zip = ListZipRecords(c);
      for (const ZipRecordView& e : zip.records) {
        out << "    " << std::left << std::setw(44) << OneLine(e.name) << std::right << std::setw(10) << e.size
            << std::setw(10) << e.data_offset << "  " << std::hex << std::setw(8) << std::setfill('0')
            << e.crc32 << std::dec << std::setfill(' ') << "\n";
      }
    }
  }
  WriteContentsText(options, cp, r, out);
}

void WriteContentsText(const InspectOptions& options, const Checkpoint& cp, const InspectReport& r,
                       std::ostream& out) {
  out << "\ncontents" << (r.root_path.empty() ? "" : " at " + r.root_path) << " (depth "
      << options.report.depth << "; --depth and --path show more):\n";
  WriteTree(r, out);
  for (const OptimizerSummary& o : r.optimizers) WriteOptimizer(o, out);
  out << "\nfindings: " << (cp.findings.empty() ? "none" : std::to_string(cp.findings.size())) << "\n";
  for (const Finding& f : cp.findings) {
    out << "  " << SeverityName(f.severity) << " [" << f.code << "] " << OneLine(f.where) << ": " << OneLine(f.message)
        << "\n";
  }
}

nlohmann::ordered_json InspectJson(const InspectOptions& options, const Checkpoint& cp, const InspectReport& r) {
  using J = nlohmann::ordered_json;
  const ContainerInfo& c = cp.container;
  J doc;
  doc["file"] = options.path;
  doc["format"] = ContainerFormatName(c.format);
  doc["file_size"] = c.file_size;
  auto opt = [](const std::optional<std::string>& s) { return s ? J(*s) : J(nullptr); };
  if (const ZipListing zip = ListZipRecords(c); !zip.records.empty()) {
    J& z = doc["zip"];
    z["prefix"] = zip.prefix;
    z["zip64"] = zip.zip64;
    z["version"] = opt(c.version);
    z["byteorder"] = opt(c.byteorder);
    z["serialization_id"] = opt(c.serialization_id);
    z["storage_records"] = c.storage_records;
    z["storage_bytes"] = c.storage_bytes;
    z["crc_checked"] = c.crc_checked;
    z["records"] = J::array();
    for (const ZipRecordView& e : zip.records) {
      z["records"].push_back({{"name", e.name}, {"size", e.size},
                              {"data_offset", e.data_offset_known ? J(e.data_offset) : J(nullptr)},
                              {"crc32", e.crc32}, {"method", e.method}});
    }
  }
  if (c.format == ContainerFormat::kZstd) {
    doc["zstd"] = {{"content_size", c.zstd_content_size ? J(*c.zstd_content_size) : J(nullptr)},
                   {"inner_format", c.zstd_inner_format ? J(ContainerFormatName(*c.zstd_inner_format)) : J(nullptr)}};
  }
  doc["pickle"] = {{"record", cp.pickle_record}, {"protocol", cp.pickle_protocol}, {"bytes", cp.pickle_bytes}};
  doc["pickle"]["globals"] = J::array();
  for (const GlobalRef& g : cp.globals) {
    doc["pickle"]["globals"].push_back({{"module", g.module}, {"name", g.name}, {"offset", g.offset}});
  }
  AddContentsJson(options, cp, r, doc);
  return doc;
}

void AddContentsJson(const InspectOptions& options, const Checkpoint& cp, const InspectReport& r,
                     nlohmann::ordered_json& doc) {
  using J = nlohmann::ordered_json;
  doc["tensors"] = {{"count", r.tensors}, {"bytes", r.tensor_bytes}};
  doc["storages"] = {{"count", cp.storages.size()}, {"bytes", r.storage_bytes}};
  J& tree = doc["tree"];
  tree["path"] = r.root_path;
  tree["depth"] = options.report.depth;
  tree["lines"] = J::array();
  for (const TreeLine& l : r.tree) {
    J line = {{"path", l.path}, {"label", l.label}, {"depth", l.depth}, {"type", l.type}, {"summary", l.summary}};
    if (!l.same_as.empty()) line["same_as"] = l.same_as;
    if (l.more) line = {{"depth", l.depth}, {"more", l.more}};
    tree["lines"].push_back(std::move(line));
  }
  doc["optimizers"] = J::array();
  for (const OptimizerSummary& o : r.optimizers) {
    J j = {{"path", o.path}, {"state_entries", o.state_entries}, {"nested_views", o.nested_views},
           {"group_params", o.group_params}};
    j["key_types"] = J::array();
    for (auto& [t, n] : o.key_types) j["key_types"].push_back({{"type", t}, {"count", n}});
    j["fields"] = J::array();
    for (const StateField& f : o.fields) {
      j["fields"].push_back({{"name", f.name}, {"count", f.count}, {"dtypes", f.dtypes}, {"bytes", f.bytes},
                             {"scalars", f.scalars}});
    }
    j["step_values"] = o.step_values;
    j["steps_read"] = o.steps_read;
    j["steps_total"] = o.steps_total;
    j["param_groups"] = J::array();
    for (const GroupSummary& g : o.groups) {
      J h = J::object();
      for (auto& [k, v] : g.hyperparameters) h[k] = v;
      j["param_groups"].push_back({{"params", g.params}, {"hyperparameters", h}});
    }
    doc["optimizers"].push_back(std::move(j));
  }
  doc["findings"] = J::array();
  for (const Finding& f : cp.findings) {
    doc["findings"].push_back({{"severity", SeverityName(f.severity)}, {"code", f.code}, {"where", f.where},
                               {"message", f.message}});
  }
}

}  // namespace optstate::tools
