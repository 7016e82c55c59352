// The zip records' CRC-32s against what validate's sweep summed, with torch's
// own ways of writing no CRC told apart from corruption.
#include <algorithm>
#include <cstdio>
#include <string>

#include "check/validate_checkpoint.h"
#include "torch/container.h"

namespace optstate {

void ReportRecordCrcs(const Checkpoint& cp, const std::vector<const ZipEntry*>& records,
                      const std::vector<ScanRecord>& scan, FindingSink& sink) {
  // torch writes CRC 0 where it computed none: every record under
  // torch.serialization.set_crc32_options(False), the storages under
  // skip_data(). torch.load never checks CRCs, so such a file is healthy
  // but its bytes cannot be checked; skip_data's storages are besides all
  // zero, a file with the structure and none of the values.
  size_t unrecorded = 0, storages = 0, skipped_storages = 0;
  const std::string data_dir = ZipDirectory(cp.container).prefix + "/data/";
  for (size_t i = 0; i < records.size(); ++i) {
    const bool storage = records[i]->name.starts_with(data_dir);
    storages += storage;
    if (scan[i].crc == records[i]->crc32 || records[i]->crc32 != 0) continue;
    ++unrecorded;
    const ByteSpan b = scan[i].bytes;
    skipped_storages +=
        storage && !b.empty() && std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
  }
  if (storages > 0 && skipped_storages == storages) {
    sink.Add("tensor-data-skipped", "the zip's " + std::to_string(storages) + " storage records",
             "every storage is zeros with no CRC-32: written under torch.serialization.skip_data(), which saves the "
             "structure and none of the values. torch.load reads it as all-zero tensors; there is nothing to resume.");
  } else if (unrecorded > 0) {
    sink.Add("crc-not-recorded", "the zip's records",
             std::to_string(unrecorded) + " of " + std::to_string(records.size()) +
                 " records carry CRC-32 0, as torch.serialization.set_crc32_options(False) writes them: torch.load "
                 "never checks CRCs, so the file loads, but these records' bytes could not be checked for corruption.");
  }
  for (size_t i = 0; i < records.size(); ++i) {
    if (scan[i].crc == records[i]->crc32 || records[i]->crc32 == 0) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "CRC-32 of the data is %08x, the directory says %08x", scan[i].crc,
                  records[i]->crc32);
    sink.Add("crc-mismatch", "record '" + records[i]->name + "' at offset " + std::to_string(records[i]->data_offset),
             std::string(buf) + ": the bytes changed after writing (disk, transfer or a partial copy).");
  }
}

}  // namespace optstate
