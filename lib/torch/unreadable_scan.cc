// What torch.load(weights_only=False) would run of a file that is not a
// checkpoint optstate can read. torch's unpicklers execute opcodes as they read
// them, so a pickle that breaks after its payload (a KeyError after the call,
// a missing storage record), a raw pickle, or a legacy stream whose first
// object is not the magic number has already run what came before the break.
// Each pickle torch would unpickle is read the same way, up to where torch
// would stop, and its globals are judged as ScanGlobals judges any pickle's.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "torch/tar_format.h"

#include "io/byte_cursor.h"
#include "optstate/file_io.h"
#include "optstate/pickle_graph.h"
#include "optstate/torch_objects.h"
#include "torch/security.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

constexpr const char* kMagic = "119547037146038801333356";  // the legacy format's first object
constexpr uint64_t kMaxInflatedPickle = 256u << 20;           // a deflated data.pkl, inflated

// Reads one pickle at `c` and adds the findings for what it named and called.
// Returns false when it broke: torch.load stops there, so nothing after it runs.
bool ScanOne(ByteCursor& c, const std::string& where, const PickleLimits& limits, std::vector<Finding>& findings,
             PickleResult& got, std::string& error, PickleReadMode mode = PickleReadMode::kStream) {
  Status s = ScanPickleGlobals(c, where, limits, findings, &got, mode);
  if (!s.ok()) error = s.ToString();
  return s.ok();
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
    if (!NameIsRecord(e.name, "data.pkl")) continue;  // torch's reader ignores case
    if (e.method == 8) {  // torch's reader inflates it; so do we (inflate.h)
      StatusOr<std::vector<std::byte>> inflated = InflateZipEntry(file, e, kMaxInflatedPickle);
      if (!inflated.ok()) {
        out.not_scanned.push_back("record '" + e.name + "' (deflated): " + inflated.status().ToString());
        continue;
      }
      ByteCursor c(ByteSpan(inflated->data(), inflated->size()));
      PickleResult got;
      std::string error;
      ++pickles;
      const std::string where = e.name + " (inflated)";
      if (!ScanOne(c, where, limits, out.findings, got, error, PickleReadMode::kFileNoPeek)) {
        out.stopped_at = "in " + where + ": " + error;
      }
      continue;
    }
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
    if (!ScanOne(c, e.name, limits, out.findings, got, error, PickleReadMode::kFileNoPeek)) {
      out.stopped_at = "in " + e.name + ": " + error;  // torch.load reads a data.pkl as an io.BytesIO
    }
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
    if (c.at_end()) {
      out.stopped_at = "at the end of the file, after pickle " + std::to_string(pickles) + ": torch.load raises there";
      break;
    }
    const uint64_t at = c.offset();
    PickleResult got;
    std::string error;
    ++pickles;
    const std::string where = "pickle " + std::to_string(pickles) + " of the stream (" + role + ")";
    if (!ScanOne(c, where, limits, out.findings, got, error)) {
      out.stopped_at = "in " + where + ", which starts at offset " + std::to_string(at) + ": " + error;
      break;
    }
    // torch checks the magic number and the protocol version after unpickling
    // them. A value made by a call (eval("0x1950A86A20F9469CFC6C") is the magic
    // number) cannot be judged here, so the scan goes on as torch may.
    const Node& root = got.graph.at(got.graph.root);
    const bool computed = root.kind == NodeKind::kObject;
    if (pickles == 1 && !computed && !(root.kind == NodeKind::kBigInt && root.text == kMagic)) {
      out.stopped_at = "after pickle 1: it is not the legacy magic number, so torch.load raises there";
      break;
    }
    if (pickles == 2 && !computed && !(root.kind == NodeKind::kInt && root.int_value == 1001)) {
      out.stopped_at = "after pickle 2: it is not protocol version 1001, so torch.load raises there";
      break;
    }
  }
  out.scanned = std::to_string(pickles) + " pickle" + (pickles == 1 ? "" : "s") +
                " of a pickle stream (torch.load's legacy path)";
  return out;
}

// torch's oldest format (before 0.4): a tar whose members 'storages',
// 'tensors' and 'pickle' torch.load unpickles in that order. The first pickle
// of each member and the whole 'pickle' member are scanned; the per-storage
// pickles between raw data inside 'storages' and 'tensors' are not.
struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of the data
  uint64_t size = 0;
};

std::optional<uint64_t> TarNumber(ByteSpan field) {
  if (!field.empty() && (static_cast<uint8_t>(field[0]) & 0x80)) {  // base-256
    uint64_t v = static_cast<uint8_t>(field[0]) & 0x7F;
    for (size_t i = 1; i < field.size(); ++i) {
      if (v >> 55) return std::nullopt;
      v = (v << 8) | static_cast<uint8_t>(field[i]);
    }
    return v;
  }
  uint64_t v = 0;
  bool any = false;
  for (std::byte b : field) {
    char c = static_cast<char>(b);
    if (c == '\0' || c == ' ') {
      if (any) break;
      continue;
    }
    if (c < '0' || c > '7' || (v >> 60)) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(c - '0');
    any = true;
  }
  return v;
}

std::string TarText(ByteSpan field) {
  std::string s(AsChars(field));
  return s.substr(0, s.find('\0'));
}

// "<length> <key>=<value>\n" records: only path and size change what follows.
void ApplyPax(std::string_view records, std::string& path, uint64_t& size, bool& has_size) {
  while (!records.empty()) {
    size_t space = records.find(' ');
    if (space == std::string_view::npos) return;
    uint64_t len = 0;
    for (char c : records.substr(0, space)) {
      if (c < '0' || c > '9' || len > records.size()) return;
      len = len * 10 + static_cast<uint64_t>(c - '0');
    }
    if (len <= space + 1 || len > records.size()) return;
    std::string_view rec = records.substr(space + 1, len - space - 2);  // without the newline
    size_t eq = rec.find('=');
    if (eq != std::string_view::npos) {
      std::string_view key = rec.substr(0, eq), value = rec.substr(eq + 1);
      if (key == "path") path = std::string(value);
      if (key == "size") {
        uint64_t v = 0;
        for (char c : value) {
          if (c < '0' || c > '9' || (v >> 59)) return;
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        size = v;
        has_size = true;
      }
    }
    records.remove_prefix(len);
  }
}

std::vector<TarMember> ReadTarMembers(ByteSpan b) {
  std::vector<TarMember> out;
  std::string pax_path, long_name;
  uint64_t pax_size = 0;  // a plain pair: GCC 12 misjudges an optional here as maybe-uninitialized
  bool has_pax_size = false;
  for (uint64_t at = 0; at + 512 <= b.size();) {
    ByteSpan h = b.subspan(at, 512);
    if (!IsTarHeader(h)) break;  // zeros end the archive; a bad checksum ends tarfile's walk too
    std::optional<uint64_t> size = TarNumber(h.subspan(124, 12));
    if (!size || *size > b.size() - at - 512) break;  // torch's tarfile would fail here too
    const char type = static_cast<char>(h[156]);
    const uint64_t data = at + 512;
    if (type == 'x' || type == 'g') {
      ApplyPax(AsChars(b.subspan(data, *size)), pax_path, pax_size, has_pax_size);
    } else if (type == 'L') {  // GNU: the next member's name, in this one's data
      long_name = TarText(b.subspan(data, *size));
    } else if (type == 'K') {  // GNU: the next member's link target
    } else {
      uint64_t real = has_pax_size ? pax_size : *size;
      if (real > b.size() - data) break;
      if (type == '0' || type == '\0' || type == '7') {
        std::string name = !pax_path.empty() ? pax_path : !long_name.empty() ? long_name : TarText(h.subspan(0, 100));
        out.push_back({std::move(name), data, real});
      }
      size = real;
      pax_path.clear();
      long_name.clear();
      has_pax_size = false;
    }
    at = data + (*size + 511) / 512 * 512;
  }
  return out;
}

}  // namespace

bool IsTarHeader(ByteSpan h) {
  if (h.size() < 512) return false;
  h = h.first(512);
  bool zero = true;
  for (std::byte x : h) zero &= x == std::byte{0};
  if (zero) return false;
  std::optional<uint64_t> field = TarNumber(h.subspan(148, 8));
  if (!field) return false;
  int64_t unsigned_sum = 8 * ' ', signed_sum = 8 * ' ';
  for (size_t i = 0; i < 512; ++i) {
    if (i >= 148 && i < 156) continue;
    unsigned_sum += static_cast<uint8_t>(h[i]);
    signed_sum += static_cast<int8_t>(h[i]);
  }
  return static_cast<int64_t>(*field) == unsigned_sum || static_cast<int64_t>(*field) == signed_sum;
}

namespace {

// One member of the tar format as torch.load walks it: a count pickle, then
// per item an args pickle followed by raw bytes, then (for 'storages') the
// views pickle. The raw bytes are sized from the args: a storage's element
// count (int64) times its class's element size; a tensor's int32 ndim, 4
// bytes, ndim sizes and strides and an offset (int64 each). Returns false when
// torch.load would stop in it; what cannot be followed goes to out.not_scanned.
bool ScanTarMember(const std::string& name, ByteCursor c, const PickleLimits& limits, UnreadableScan& out,
                   size_t& pickles) {
  const std::string where = "tar member '" + name + "'";
  PickleResult got;
  std::string error;
  auto scan = [&](const std::string& what) {
    ++pickles;
    if (ScanOne(c, where + " (" + what + ")", limits, out.findings, got, error)) return true;
    out.stopped_at = "in " + where + " (" + what + "): " + error;
    return false;
  };
  if (name == "pickle") return scan("the object");  // one pickle: the checkpoint's object
  if (!scan("the count")) return false;
  const Node& root = got.graph.at(got.graph.root);
  if (root.kind != NodeKind::kInt || root.int_value < 0 || root.int_value > (1 << 24)) {
    out.not_scanned.push_back("the rest of " + where + ": its count is " + TypeName(got.graph, got.graph.root) +
                              ", not a number of items");
    return true;
  }
  const int64_t count = root.int_value;  // `got` is reused by every scan below
  const bool storages = name == "storages";
  for (int64_t i = 0; i < count; ++i) {
    if (!scan("item " + std::to_string(i))) return false;
    const Node& args = got.graph.at(got.graph.root);
    Status raw;
    if (storages) {
      std::optional<DType> dtype;
      if (args.kind == NodeKind::kTuple && args.items.size() == 3 &&
          got.graph.at(args.items[2]).kind == NodeKind::kGlobal) {
        dtype = DTypeFromStorageClass(got.graph.at(args.items[2]).name());
      }
      if (!dtype) {
        out.not_scanned.push_back("the rest of " + where + ": item " + std::to_string(i) +
                                  " names no storage class, so its data cannot be skipped");
        return true;
      }
      StatusOr<int64_t> n = c.ReadI64LE("storage element count");
      const uint64_t size = GetDTypeInfo(*dtype).element_size;
      raw = !n.ok() ? n.status()
            : *n < 0 || static_cast<uint64_t>(*n) > c.remaining() / size
                ? TruncatedError("storage of " + std::to_string(*n) + " elements runs past the member")
                : c.Skip(static_cast<uint64_t>(*n) * size, "storage data");
    } else {
      StatusOr<int32_t> ndim = c.ReadI32LE("tensor ndim");
      raw = !ndim.ok() ? ndim.status()
            : *ndim < 0 || *ndim > 64 ? CorruptError("tensor of " + std::to_string(*ndim) + " dimensions")
                                     : c.Skip(4 + 16 * static_cast<uint64_t>(*ndim) + 8, "tensor sizes and strides");
    }
    if (!raw.ok()) {  // torch.load fails reading the same bytes
      out.stopped_at = "in " + where + ", item " + std::to_string(i) + ": " + raw.ToString();
      return false;
    }
  }
  return !storages || scan("the storage views");
}

UnreadableScan ScanTar(const ByteCursor& file, const PickleLimits& limits) {
  UnreadableScan out;
  std::vector<TarMember> members = ReadTarMembers(file.data());
  size_t pickles = 0;
  for (const char* name : {"storages", "tensors", "pickle"}) {
    // tarfile's getmember takes the last member of a name.
    auto m = std::find_if(members.rbegin(), members.rend(), [&](const TarMember& t) { return t.name == name; });
    if (m == members.rend()) {
      out.stopped_at = std::string("at the tar member '") + name + "', which is missing: torch.load raises there";
      break;
    }
    ByteCursor c(file.data().subspan(m->offset, m->size), file.base_offset() + m->offset);
    if (!ScanTarMember(name, c, limits, out, pickles)) break;
  }
  out.scanned = std::to_string(pickles) + " pickle" + (pickles == 1 ? "" : "s") + " of a tar checkpoint (torch < 0.4)";
  return out;
}

// A pickle's shape misleads a reader only into loading it: where torch.load
// raises before returning anything, a tampered or expanding structure misleads
// no one (and bytes that are no pickle at all parse into such shapes by
// chance), so only what ran before the raise is reported.
void DropShapesOfALoadThatRaises(UnreadableScan& out) {
  if (out.stopped_at.empty()) return;
  std::erase_if(out.findings,
                [](const Finding& f) { return f.code == "pickle-tampered" || f.code == "pickle-expansion"; });
}

}  // namespace

UnreadableScan ScanWhatTorchLoadWouldRun(const ByteCursor& file, const PickleLimits& limits) {
  ByteSpan b = file.data();
  UnreadableScan out;
  if (b.size() >= 4 && b[0] == std::byte{'P'} && b[1] == std::byte{'K'}) {
    out = ScanZip(file, limits);
  } else if (IsTarHeader(b)) {
    out = ScanTar(file, limits);  // torch tries tar before the pickle stream
  } else {
    // Anything else goes to torch's legacy path, which unpickles first and checks
    // after (protocols 0 and 1 have no PROTO opcode, so no start can be ruled out).
    out = ScanPickleStream(file, limits);
  }
  DropShapesOfALoadThatRaises(out);
  return out;
}

std::optional<UnreadableScan> ScanWhatTorchLoadWouldRunOf(const std::string& path, const Status& read_error,
                                                          const PickleLimits& limits) {
  if (read_error.code() == StatusCode::kIoError || read_error.code() == StatusCode::kNotFound ||
      read_error.code() == StatusCode::kInvalidArgument) {
    return std::nullopt;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A DCP directory: dcp.load unpickles its .metadata before anything else.
    StatusOr<MappedFile> metadata = MappedFile::Open(path + "/.metadata");
    if (!metadata.ok()) return std::nullopt;
    UnreadableScan out;
    ByteCursor c(metadata->bytes());
    PickleResult got;
    std::string error;
    if (!ScanOne(c, ".metadata", limits, out.findings, got, error)) out.stopped_at = "in .metadata: " + error;
    DropShapesOfALoadThatRaises(out);
    // DCP's own metadata classes are no news in its .metadata: only what is
    // an error to call is worth saying beside the read error.
    std::erase_if(out.findings, [](const Finding& f) { return f.severity != Severity::kError; });
    out.scanned = "the .metadata pickle of a DCP directory";
    return out;
  }
  StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return std::nullopt;
  ByteSpan bytes = mapped->bytes();
  if (bytes.size() >= 4 && LoadU32LEUnchecked(bytes.data()) == 0xFD2FB528u) return std::nullopt;  // zstd
  return ScanWhatTorchLoadWouldRun(ByteCursor(bytes), limits);
}

}  // namespace optstate
