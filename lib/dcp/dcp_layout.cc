// The layout rules of a DCP checkpoint that .metadata alone decides: where
// items are stored, and how a tensor's chunks tile it.
#include "dcp/dcp_layout.h"

#include <optional>

#include "optstate/torch_objects.h"

namespace optstate {
namespace {

// numel of a shape, or nullopt when it overflows 2^62.
std::optional<uint64_t> ShapeVolume(const std::vector<int64_t>& shape) {
  unsigned __int128 v = 1;
  for (int64_t d : shape) {
    v *= static_cast<uint64_t>(d);
    if (v > (static_cast<unsigned __int128>(1) << 62)) return std::nullopt;
  }
  return static_cast<uint64_t>(v);
}

// A relative path that stays inside the checkpoint directory: no leading '/',
// no empty, "." or ".." component, no NUL.
bool StaysInside(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view part(p.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

Status CheckDcpLocation(const DcpLocation& where, const std::string& fqn) {
  if (!StaysInside(where.relative_path)) {
    return CorruptError("'" + fqn + "' is stored in '" + where.relative_path +
                        "', a path that leaves the checkpoint directory; refused");
  }
  return Status();
}

// Chunks must lie inside the tensor, must not overlap, and must cover it.
Status CheckDcpChunkLayout(const DcpEntry& e) {
  std::optional<uint64_t> total = ShapeVolume(e.size);
  if (!total) return LimitExceededError("'" + e.fqn + "': global shape " + ShapeText(e.size) + " is too large");
  unsigned __int128 covered = 0;
  for (size_t i = 0; i < e.chunks.size(); ++i) {
    const DcpChunk& c = e.chunks[i];
    std::string which = "'" + e.fqn + "' chunk " + std::to_string(i) + " (offsets " + ShapeText(c.offsets) +
                        ", sizes " + ShapeText(c.sizes) + ")";
    if (c.offsets.size() != e.size.size() || c.sizes.size() != e.size.size()) {
      return CorruptError(which + " has a different number of dimensions than the tensor " + ShapeText(e.size));
    }
    for (size_t d = 0; d < e.size.size(); ++d) {
      if (c.offsets[d] > e.size[d] || c.sizes[d] > e.size[d] - c.offsets[d]) {
        return CorruptError(which + " reaches outside the tensor " + ShapeText(e.size));
      }
    }
    covered += c.numel();
    if (c.numel() == 0) continue;
    for (size_t j = 0; j < i; ++j) {
      const DcpChunk& o = e.chunks[j];
      if (o.numel() == 0) continue;
      bool overlap = true;
      for (size_t d = 0; d < e.size.size() && overlap; ++d) {
        overlap = c.offsets[d] < o.offsets[d] + o.sizes[d] && o.offsets[d] < c.offsets[d] + c.sizes[d];
      }
      if (overlap) return CorruptError(which + " overlaps chunk " + std::to_string(j) + " (offsets " +
                                       ShapeText(o.offsets) + ", sizes " + ShapeText(o.sizes) + ")");
    }
  }
  if (covered != *total) {
    return CorruptError("'" + e.fqn + "': its chunks cover " + std::to_string(static_cast<uint64_t>(covered)) +
                        " of " + std::to_string(*total) + " elements of " + ShapeText(e.size) + "; the rest is missing");
  }
  return Status();
}

uint64_t DcpChunk::numel() const { return ShapeVolume(sizes).value_or(0); }
uint64_t DcpEntry::numel() const { return ShapeVolume(size).value_or(0); }

uint64_t DcpEntry::RowBytes() const {
  uint64_t n = GetDTypeInfo(dtype).element_size;
  for (size_t d = 1; d < size.size(); ++d) n *= static_cast<uint64_t>(size[d]);
  return n;
}

bool DcpEntry::HoldsWholeRows() const {
  for (const DcpChunk& c : chunks) {
    for (size_t d = 1; d < size.size(); ++d) {
      if (c.offsets[d] != 0 || c.sizes[d] != size[d]) return false;
    }
  }
  return true;
}

}  // namespace optstate
