// What torch.load(weights_only=False) would run of a file that is not a
// checkpoint optstate can read. torch's unpicklers execute opcodes as they read
// them, so a pickle that breaks after its payload (a KeyError after the call,
// a missing storage record), a raw pickle, or a legacy stream whose first
// object is not the magic number has already run what came before the break.
// Each pickle torch would unpickle is read the same way, up to where torch
// would stop, and its globals are judged as ScanGlobals judges any pickle's.
#include <string>
#include <vector>

#include "optstate/security.h"
#include "optstate/zip_archive.h"

namespace optstate {
namespace {

constexpr const char* kMagic = "119547037146038801333356";  // the legacy format's first object

// Reads one pickle at `c` and adds the findings for what it named and called.
// Returns false when it broke: torch.load stops there, so nothing after it runs.
bool ScanOne(ByteCursor& c, const std::string& where, const PickleLimits& limits, std::vector<Finding>& findings,
             PickleResult& got, std::string& error) {
  PickleResult partial;
  StatusOr<PickleResult> r = ReadPickle(c, limits, &partial);
  const bool ok = r.ok();
  if (ok) {
    got = std::move(*r);
  } else {
    got = std::move(partial);
    error = r.status().ToString();
  }
  const std::set<uint64_t> called = CalledGlobalOffsets(got.graph);
  ScanGlobals(got.globals, where, /*nested=*/false, findings, &called);
  return ok;
}

UnreadableScan ScanZip(const ByteCursor& file, const PickleLimits& limits) {
  UnreadableScan out;
  StatusOr<ZipArchive> zip = ReadZipDirectory(file);
  if (!zip.ok()) {
    out.scanned = "nothing: the zip directory is unreadable (" + zip.status().ToString() +
                  "), and torch.load fails on it before unpickling anything";
    return out;
  }
  size_t pickles = 0;
  for (const ZipEntry& e : zip->entries) {
    if (!(e.name == "data.pkl" || e.name.ends_with("/data.pkl"))) continue;
    if (e.method != 0) {
      out.not_scanned.push_back("record '" + e.name + "' is compressed (method " + std::to_string(e.method) + ")");
      continue;
    }
    StatusOr<ByteSpan> data = ZipEntryData(file, e);
    StatusOr<uint64_t> at = ZipEntryDataOffset(file, e);
    if (!data.ok() || !at.ok()) {
      out.not_scanned.push_back("record '" + e.name + "': " + (data.ok() ? at.status() : data.status()).ToString());
      continue;
    }
    ByteCursor c(*data, file.base_offset() + *at);
    PickleResult got;
    std::string error;
    ++pickles;
    if (!ScanOne(c, e.name, limits, out.findings, got, error)) out.stopped_at = "in " + e.name + ": " + error;
  }
  out.scanned = std::to_string(pickles) + " data.pkl record" + (pickles == 1 ? "" : "s") + " of the zip";
  return out;
}

// torch's legacy path unpickles the magic number, the protocol version and
// sys_info, checking each only after it ran, then the main object and the
// storage key list: up to five pickles back to back.
UnreadableScan ScanPickleStream(const ByteCursor& file, const PickleLimits& limits) {
  static const char* kRoles[] = {"the magic number", "the protocol version", "sys_info", "the main object",
                                 "the storage keys"};
  UnreadableScan out;
  ByteCursor c = file;
  size_t pickles = 0;
  for (const char* role : kRoles) {
    if (c.at_end()) break;
    const uint64_t at = c.offset();
    PickleResult got;
    std::string error;
    ++pickles;
    const std::string where = "pickle " + std::to_string(pickles) + " of the stream (" + role + ")";
    if (!ScanOne(c, where, limits, out.findings, got, error)) {
      out.stopped_at = "in " + where + ", which starts at offset " + std::to_string(at) + ": " + error;
      break;
    }
    const Node& root = got.graph.at(got.graph.root);
    if (pickles == 1 && !(root.kind == NodeKind::kBigInt && root.text == kMagic)) {
      out.stopped_at = "after pickle 1: it is not the legacy magic number, so torch.load raises there";
      break;
    }
    if (pickles == 2 && !(root.kind == NodeKind::kInt && root.int_value == 1001)) {
      out.stopped_at = "after pickle 2: it is not protocol version 1001, so torch.load raises there";
      break;
    }
  }
  out.scanned = std::to_string(pickles) + " pickle" + (pickles == 1 ? "" : "s") +
                " of a pickle stream (torch.load's legacy path)";
  return out;
}

}  // namespace

UnreadableScan ScanWhatTorchLoadWouldRun(const ByteCursor& file, const PickleLimits& limits) {
  ByteSpan b = file.data();
  if (b.size() >= 4 && b[0] == std::byte{'P'} && b[1] == std::byte{'K'}) return ScanZip(file, limits);
  // Anything else goes to torch's legacy path, which unpickles first and checks
  // after (protocols 0 and 1 have no PROTO opcode, so no start can be ruled out).
  return ScanPickleStream(file, limits);
}

}  // namespace optstate
