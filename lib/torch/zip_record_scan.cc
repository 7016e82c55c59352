// See zip_record_scan.h.
#include "torch/zip_record_scan.h"

#include <string>
#include <string_view>

#include "io/byte_cursor.h"
#include "torch/container.h"
#include "torch/security.h"
#include "zip/zip_archive.h"

namespace optstate {

// torch 2.6 reads the first zip record of a name and torch 1.13 the last, so a
// name held twice loads a different checkpoint in each: an error. Every record
// named data.pkl is scanned, whichever one a torch version unpickles.
void ScanRecordsBesideTheMainPickle(const ByteCursor& whole, const PickleLimits& limits, Checkpoint& out) {
  const ZipArchive& zip = ZipDirectory(out.container);
  // torch's zip reader matches names ignoring ASCII case: names that differ
  // only so are one record to it, and which it takes is the reader's choice.
  for (const auto& [later, first] : RecordsNamedAlike(zip.entries)) {
    const std::string& name = zip.entries[later].name;
    const std::string& earlier = zip.entries[first].name;
    if (earlier == name) {
      out.findings.push_back({Severity::kError, "zip-duplicate-record", name,
                              "two zip records named '" + name + "': torch 2.6 reads the first, torch 1.13 the "
                              "last, so each loads a different checkpoint (optstate reads the first)", ""});
    } else {
      out.findings.push_back({Severity::kError, "zip-duplicate-record", name,
                              "zip records '" + earlier + "' and '" + name + "' differ only in "
                              "case: torch's zip reader ignores case, so they are one name to it and which one it "
                              "reads is its own choice (optstate scans both)", ""});
    }
  }
  // torch.load takes a zip holding constants.pkl (its exact name) for a
  // TorchScript archive and, unless weights_only, hands it to torch.jit.load.
  if (const ZipEntry* ts = zip.FindExactlyNamed("constants.pkl")) {
    out.findings.push_back({Severity::kError, "torchscript-archive", ts->name,
                            "the zip holds constants.pkl, so torch.load(weights_only=False) hands it to "
                            "torch.jit.load instead of unpickling data.pkl: that runs the TorchScript code in its "
                            "code/ records (a scripted class's __setstate__) and TorchScript's own unpickler, none of "
                            "which optstate reads; torch.load(weights_only=True) refuses it", ""});
    StatusOr<ByteSpan> data = ZipEntryData(whole, *ts);
    StatusOr<uint64_t> at = ZipEntryDataOffset(whole, *ts);
    if (ts->method == 0 && data.ok() && at.ok()) {
      ByteCursor c(*data, whole.base_offset() + *at);
      (void)ScanPickleGlobals(c, ts->name, limits, out.findings);
    }
  }
  const ZipEntry* main = zip.Find("data.pkl");
  for (const ZipEntry& e : zip.entries) {
    if (&e == main || !NameIsRecord(e.name, "data.pkl")) continue;
    if (e.method == 8) {  // torch's reader inflates a deflated record
      StatusOr<std::vector<std::byte>> inflated = InflateZipEntry(whole, e, 256u << 20);
      if (inflated.ok()) {
        ByteCursor c(ByteSpan(inflated->data(), inflated->size()));
        (void)ScanPickleGlobals(c, e.name + " (inflated)", limits, out.findings, nullptr, PickleReadMode::kFileNoPeek);
        continue;
      }
    }
    StatusOr<ByteSpan> data = ZipEntryData(whole, e);
    StatusOr<uint64_t> at = ZipEntryDataOffset(whole, e);
    if (e.method != 0 || !data.ok() || !at.ok()) {
      out.findings.push_back({Severity::kWarning, "nested-pickle-unreadable", e.name,
                              "a second data.pkl record that could not be scanned (" +
                                  (e.method != 0 ? "compressed, method " + std::to_string(e.method)
                                                 : (data.ok() ? at.status() : data.status()).ToString()) +
                                  "): another torch version may unpickle it", ""});
      continue;
    }
    ByteCursor c(*data, whole.base_offset() + *at);
    // A break is no reason to stop the scan. torch.load reads a data.pkl as an io.BytesIO.
    (void)ScanPickleGlobals(c, e.name, limits, out.findings, nullptr, PickleReadMode::kFileNoPeek);
  }
}

}  // namespace optstate
