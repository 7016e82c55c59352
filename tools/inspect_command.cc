#include "inspect_command.h"

#include <iomanip>
#include <memory>

#include <CLI/CLI.hpp>

#include "optstate/container.h"
#include "optstate/file_io.h"

namespace optstate::tools {
namespace {

constexpr const char* kName = "inspect";

nlohmann::ordered_json ToJson(const InspectOptions& options, const ContainerInfo& info) {
  nlohmann::ordered_json doc;
  doc["file"] = options.path;
  doc["format"] = ContainerFormatName(info.format);
  doc["file_size"] = info.file_size;
  if (info.format == ContainerFormat::kZip) {
    auto& z = doc["zip"];
    z["prefix"] = info.zip.prefix;
    z["zip64"] = info.zip.zip64;
    z["pickle_protocol"] = info.pickle_protocol;
    z["version"] = info.version ? nlohmann::ordered_json(*info.version) : nullptr;
    z["byteorder"] = info.byteorder ? nlohmann::ordered_json(*info.byteorder) : nullptr;
    z["serialization_id"] =
        info.serialization_id ? nlohmann::ordered_json(*info.serialization_id) : nullptr;
    z["storage_records"] = info.storage_records;
    z["storage_bytes"] = info.storage_bytes;
    z["crc_checked"] = info.crc_checked;
    auto& records = z["records"] = nlohmann::ordered_json::array();
    for (const ZipEntry& e : info.zip.entries) {
      records.push_back({{"name", e.name},
                         {"size", e.size},
                         {"data_offset", e.data_offset},
                         {"crc32", e.crc32},
                         {"method", e.method}});
    }
  }
  if (info.format == ContainerFormat::kZstd) {
    auto& z = doc["zstd"];
    z["content_size"] = info.zstd_content_size ? nlohmann::ordered_json(*info.zstd_content_size)
                                               : nullptr;
    z["inner_format"] = info.zstd_inner_format
                            ? nlohmann::ordered_json(ContainerFormatName(*info.zstd_inner_format))
                            : nullptr;
  }
  return doc;
}

void WriteText(const InspectOptions& options, const ContainerInfo& info, std::ostream& out) {
  out << options.path << ": ";
  switch (info.format) {
    case ContainerFormat::kZip: {
      out << "torch.save zip, " << info.file_size << " bytes\n";
      out << "  archive dir:       " << info.zip.prefix << "/" << (info.zip.zip64 ? " (zip64)" : "")
          << "\n";
      out << "  data.pkl:          pickle protocol " << info.pickle_protocol << "\n";
      out << "  version:           " << info.version.value_or("(missing)") << "\n";
      out << "  byteorder:         " << info.byteorder.value_or("(absent: written by torch < 2.1)")
          << "\n";
      if (info.serialization_id) out << "  serialization id:  " << *info.serialization_id << "\n";
      out << "  storages:          " << info.storage_records << " records, " << info.storage_bytes
          << " bytes\n";
      out << "  records:           " << info.zip.entries.size()
          << (info.crc_checked ? ", all CRC-32 verified" : "") << "\n";
      if (options.records) {
        out << "    " << std::left << std::setw(44) << "name" << std::right << std::setw(10)
            << "size" << std::setw(10) << "offset" << "  crc32\n";
        for (const ZipEntry& e : info.zip.entries) {
          out << "    " << std::left << std::setw(44) << e.name << std::right << std::setw(10)
              << e.size << std::setw(10) << e.data_offset << "  " << std::hex << std::setw(8)
              << std::setfill('0') << e.crc32 << std::dec << std::setfill(' ') << "\n";
        }
      }
      break;
    }
    case ContainerFormat::kLegacy:
      out << "torch.save legacy format (torch < 1.6 or _use_new_zipfile_serialization=False), "
          << info.file_size << " bytes\n";
      break;
    case ContainerFormat::kZstd:
      out << "zstd-compressed, " << info.file_size << " bytes";
      if (info.zstd_content_size) out << " (" << *info.zstd_content_size << " uncompressed)";
      out << "\n  inner format: "
          << (info.zstd_inner_format ? ContainerFormatName(*info.zstd_inner_format)
                                     : std::string_view("not a checkpoint"))
          << "\n";
      break;
  }
}

}  // namespace

int RunInspect(const InspectOptions& options, CommandOutput& output) {
  auto file = MappedFile::Open(options.path);
  if (!file.ok()) return ReportError(output, kName, file.status(), options.json);
  ContainerOptions container_options;
  container_options.verify_crc = options.verify_crc;
  auto info = InspectContainer(ByteCursor(file->bytes()), container_options);
  if (!info.ok()) {
    return ReportError(output, kName, std::move(info).status().WithContext(options.path),
                       options.json);
  }
  if (options.json) {
    WriteJson(output, ToJson(options, *info));
  } else {
    WriteText(options, *info, output.out);
  }
  return kExitOk;
}

CommandRunner AddInspectCommand(CLI::App& parent) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = parent.add_subcommand(kName, "Show what is inside a checkpoint, without loading tensors");
  cmd->add_option("path", options->path, "torch.save file (.pt, .pth, .bin) or .zst")->required();
  cmd->add_flag("--json", options->json, "Write JSON (schemas/inspect.schema.json)");
  cmd->add_flag("--records", options->records, "List every zip record with size, offset and CRC");
  cmd->add_flag("--verify-crc", options->verify_crc,
                "Recompute every record's CRC-32 (torch.load never does)");
  cmd->footer(
      "\nExamples:\n"
      "  optstate inspect checkpoint.pt\n"
      "  optstate inspect --records --verify-crc checkpoint.pt\n"
      "  optstate inspect --json checkpoint.pt.zst");
  return [options](CommandOutput& output) { return RunInspect(*options, output); };
}

}  // namespace optstate::tools
