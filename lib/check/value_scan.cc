#include "check/value_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <unistd.h>

#include "io/crc32.h"
#include "io/parallel_for.h"
#include "optstate/file_io.h"
#include "torch/element_values.h"

namespace optstate {
namespace {

// float32, the common case, on the raw bits so the loop vectorises: exponent
// all ones is NaN or infinity; the sign bit of a non-zero value is negative.
// Cloned for AVX-512 and AVX2 (chosen at load time) because this loop and the CRC are the
// whole of validate's time on a large file.
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) ValueCounts CountFloat32(const std::byte* p, size_t n) {
  uint32_t nonfinite = 0, negative = 0, nonzero = 0;  // per call: callers pass at most kBlock bytes
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + 4 * i, 4);
    uint32_t special = (u & 0x7F800000u) == 0x7F800000u;
    uint32_t zero = (u & 0x7FFFFFFFu) == 0;
    nonfinite += special;
    negative += (u >> 31) & !zero & !special;
    nonzero += !zero;
  }
  return {nonfinite, negative, nonzero};
}

ValueCounts CountOther(const std::byte* p, size_t n, DType dtype) {
  ValueCounts c;
  for (size_t i = 0; i < n; ++i) {
    double x = LoadAsDouble(p, dtype, i);
    c.nonfinite += !std::isfinite(x);
    c.negative += x < 0;
    c.nonzero += x != 0;
  }
  return c;
}

// Bytes read between CRC updates and counts: small enough to stay in L2, so
// the count reads what the CRC just brought in. pread copies into a buffer of
// this size fastest here (128 KiB: 0.39 s for 3.2 GiB on one core, 256 KiB:
// 1.6 s, as copies that size bypass the cache).
constexpr size_t kBlock = 128 << 10;
// A record is cut into pieces of this size so that both cores share even one
// huge record; piece CRCs are joined with Crc32Combine.
constexpr size_t kPiece = 32 << 20;

struct Part {             // the share of one range that lies in one piece
  size_t range;
  ByteSpan bytes;
  ValueCounts counts;
};

struct Piece {
  size_t record;          // SIZE_MAX for a range outside every record
  ByteSpan bytes;
  uint32_t crc = 0;
  std::vector<Part> parts;  // by address
};

// `file`: where the piece lies in a file, to pread it block by block into
// `buffer`; the mapping is read only if that fails. `loaded`: the piece's
// bytes already read (a piece of a Batch), so nothing is read here.
void Sweep(Piece& piece, const std::vector<ScanRange>& ranges, std::optional<FileRange> file, std::byte* buffer,
           const std::byte* loaded = nullptr) {
  const std::byte* end = piece.bytes.data() + piece.bytes.size();
  size_t next = 0;
  for (const std::byte* block = piece.bytes.data(); block < end; block += kBlock) {
    if (CancellationRequested()) return;  // the validate entry points report it
    const std::byte* block_end = std::min(end, block + kBlock);
    // Addresses stay those of the mapping (parts are placed by them); `data` is where the bytes are read.
    const std::byte* data = block;
    if (loaded != nullptr) {
      data = loaded + (block - piece.bytes.data());
    } else if (file) {
      size_t want = static_cast<size_t>(block_end - block);
      uint64_t at = file->offset + static_cast<uint64_t>(block - piece.bytes.data());
      ssize_t got = ::pread(file->fd, buffer, want, static_cast<off_t>(at));
      if (got == static_cast<ssize_t>(want)) data = buffer;
    }
    auto here = [&](const std::byte* p) { return data + (p - block); };
    if (piece.record != SIZE_MAX) piece.crc = Crc32(ByteSpan(data, block_end - block), piece.crc);
    // Parts are sorted by start: those before `next` ended in earlier blocks.
    for (size_t i = next; i < piece.parts.size(); ++i) {
      Part& part = piece.parts[i];
      const std::byte* a = std::max(block, part.bytes.data());
      const std::byte* b = std::min(block_end, part.bytes.data() + part.bytes.size());
      if (a >= block_end) break;
      if (a < b) part.counts += CountValues(ByteSpan(here(a), b - a), ranges[part.range].dtype);
    }
    // Parts that end in this block are done (with overlapping views, only a finished prefix can be skipped).
    while (next < piece.parts.size() &&
           piece.parts[next].bytes.data() + piece.parts[next].bytes.size() <= block_end) {
      ++next;
    }
  }
}

// Pieces [first, end) that lie one after another in one block's span of
// the mapping: a file of 4 * 10^4 tensors of 16 KiB is as many records, and a
// pread each was a system call per 16 KiB; a batch is one pread of up to
// kBlock bytes (with the local headers between the records, not looked at).
struct Batch {
  size_t first, end;
};

std::vector<Batch> BatchNeighbours(const std::vector<Piece>& pieces) {
  std::vector<Batch> batches;
  for (size_t i = 0; i < pieces.size();) {
    size_t j = i + 1;
    if (!pieces[i].bytes.empty()) {
      const std::byte* start = pieces[i].bytes.data();
      const std::byte* end = start + pieces[i].bytes.size();
      for (; j < pieces.size(); ++j) {
        const ByteSpan next = pieces[j].bytes;
        if (next.empty() || next.data() < end || next.data() + next.size() - start > static_cast<ptrdiff_t>(kBlock)) {
          break;
        }
        end = next.data() + next.size();
      }
    }
    batches.push_back({i, j});
    i = j;
  }
  return batches;
}

// Sweeps the batch's pieces from one read of their whole span when it lies in
// one file, else each piece on its own.
void SweepBatch(std::vector<Piece>& pieces, Batch batch, const std::vector<ScanRange>& ranges, const ScanHooks& hooks,
                std::byte* buffer) {
  if (batch.end - batch.first > 1 && hooks.locate) {
    const std::byte* start = pieces[batch.first].bytes.data();
    const ByteSpan& last = pieces[batch.end - 1].bytes;
    const ByteSpan span(start, static_cast<size_t>(last.data() + last.size() - start));
    std::optional<FileRange> file = hooks.locate(span);
    if (file &&
        ::pread(file->fd, buffer, span.size(), static_cast<off_t>(file->offset)) == static_cast<ssize_t>(span.size())) {
      for (size_t p = batch.first; p < batch.end; ++p) {
        Sweep(pieces[p], ranges, std::nullopt, buffer, buffer + (pieces[p].bytes.data() - start));
      }
      return;
    }
  }
  for (size_t p = batch.first; p < batch.end; ++p) {
    std::optional<FileRange> file = hooks.locate ? hooks.locate(pieces[p].bytes) : std::nullopt;
    Sweep(pieces[p], ranges, file, buffer);
  }
}

}  // namespace

ValueCounts CountValues(ByteSpan bytes, DType dtype) {
  size_t size = GetDTypeInfo(dtype).element_size;
  if (dtype == DType::kFloat32) {
    ValueCounts total;
    for (size_t at = 0; at + 4 <= bytes.size(); at += kBlock) {  // keeps CountFloat32's 32-bit counters safe
      size_t n = std::min(kBlock, bytes.size() - at) / 4;
      total += CountFloat32(bytes.data() + at, n);
    }
    return total;
  }
  return CountOther(bytes.data(), bytes.size() / size, dtype);
}

void SweptRecords::Sweep(ByteSpan where, ByteSpan bytes) {
  if ((bytes.size() > kMaxTinyBytes && bytes.size() < kMinBytes) || bytes.size() > kBlock ||
      where.size() != bytes.size()) {
    return;
  }
  const ValueCounts c = CountValues(bytes, DType::kFloat32);  // at most kBlock / 4 of each: uint32 holds them
  swept_.push_back({where.data(), static_cast<uint32_t>(bytes.size()), Crc32(bytes, 0),
                    static_cast<uint32_t>(c.nonfinite), static_cast<uint32_t>(c.negative),
                    static_cast<uint32_t>(c.nonzero)});
}

void SweptRecords::Seal() {
  auto by_address = [](const Swept& a, const Swept& b) { return a.data < b.data; };
  if (!std::is_sorted(swept_.begin(), swept_.end(), by_address)) std::sort(swept_.begin(), swept_.end(), by_address);
}

const SweptRecords::Swept* SweptRecords::Find(ByteSpan where) const {
  auto it = std::lower_bound(swept_.begin(), swept_.end(), where.data(),
                             [](const Swept& s, const std::byte* p) { return s.data < p; });
  return it != swept_.end() && it->data == where.data() && it->size == where.size() ? &*it : nullptr;
}

namespace {

// The records and ranges `swept` answers are answered from it; the rest are
// scanned as usual.
void ScanWhatWasNotSwept(std::vector<ScanRecord>& records, std::vector<ScanRange>& ranges, const ScanHooks& hooks,
                         int threads, const SweptRecords& swept) {
  std::vector<size_t> record_left, range_left;
  std::vector<ScanRecord> scan_records;
  std::vector<ScanRange> scan_ranges;
  for (size_t r = 0; r < records.size(); ++r) {
    if (const SweptRecords::Swept* s = swept.Find(records[r].bytes)) {
      records[r].crc = s->crc;
    } else {
      record_left.push_back(r);
      scan_records.push_back(records[r]);
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    const SweptRecords::Swept* s = ranges[i].dtype == DType::kFloat32 ? swept.Find(ranges[i].bytes) : nullptr;
    if (s != nullptr) {
      ranges[i].counts += ValueCounts{s->nonfinite, s->negative, s->nonzero};
    } else {
      range_left.push_back(i);
      scan_ranges.push_back(ranges[i]);
    }
  }
  ScanRecordsAndRanges(scan_records, scan_ranges, hooks, threads);
  for (size_t j = 0; j < record_left.size(); ++j) records[record_left[j]].crc = scan_records[j].crc;
  for (size_t j = 0; j < range_left.size(); ++j) ranges[range_left[j]].counts = scan_ranges[j].counts;
}

}  // namespace

void ScanRecordsAndRanges(std::vector<ScanRecord>& records, std::vector<ScanRange>& ranges, const ScanHooks& hooks,
                          int threads, const SweptRecords* swept) {
  if (swept != nullptr && swept->size() > 0) return ScanWhatWasNotSwept(records, ranges, hooks, threads, *swept);
  std::vector<size_t> by_address(records.size());
  for (size_t i = 0; i < records.size(); ++i) by_address[i] = i;
  std::sort(by_address.begin(), by_address.end(),
            [&](size_t a, size_t b) { return records[a].bytes.data() < records[b].bytes.data(); });
  std::vector<Piece> pieces;
  std::vector<size_t> first_piece(records.size());
  for (size_t r : by_address) {
    first_piece[r] = pieces.size();
    ByteSpan bytes = records[r].bytes;
    for (size_t at = 0; at < bytes.size() || at == 0; at += kPiece) {
      pieces.push_back({r, bytes.subspan(at, std::min(kPiece, bytes.size() - at)), 0, {}});
      if (bytes.empty()) break;
    }
  }
  // Each range goes to the record that holds it (records do not overlap), cut at piece boundaries.
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::byte* a = ranges[i].bytes.data();
    const std::byte* b = a + ranges[i].bytes.size();
    auto it = std::upper_bound(by_address.begin(), by_address.end(), a,
                               [&](const std::byte* p, size_t r) { return p < records[r].bytes.data(); });
    const ScanRecord* home = nullptr;
    if (it != by_address.begin()) {
      const ScanRecord& r = records[*std::prev(it)];
      if (b <= r.bytes.data() + r.bytes.size()) home = &r;
    }
    if (home == nullptr || ranges[i].bytes.empty()) {
      pieces.push_back({SIZE_MAX, ranges[i].bytes, 0, {{i, ranges[i].bytes, {}}}});
      continue;
    }
    size_t r = static_cast<size_t>(home - records.data());
    for (size_t p = first_piece[r]; p < pieces.size() && pieces[p].record == r; ++p) {
      const std::byte* pa = std::max(a, pieces[p].bytes.data());
      const std::byte* pb = std::min(b, pieces[p].bytes.data() + pieces[p].bytes.size());
      if (pa < pb) pieces[p].parts.push_back({i, ByteSpan(pa, pb - pa), {}});
    }
  }
  for (Piece& p : pieces) {
    std::sort(p.parts.begin(), p.parts.end(),
              [](const Part& x, const Part& y) { return x.bytes.data() < y.bytes.data(); });
  }
  const std::vector<Batch> batches = BatchNeighbours(pieces);
  ParallelFor(batches.size(), threads, [&](size_t i) {
    thread_local std::vector<std::byte> buffer(kBlock);
    SweepBatch(pieces, batches[i], ranges, hooks, buffer.data());
  });
  for (size_t r = 0; r < records.size(); ++r) {
    uint32_t crc = 0;
    for (size_t p = first_piece[r]; p < pieces.size() && pieces[p].record == r; ++p) {
      crc = p == first_piece[r] ? pieces[p].crc : Crc32Combine(crc, pieces[p].crc, pieces[p].bytes.size());
    }
    records[r].crc = crc;
  }
  for (Piece& p : pieces) {
    for (Part& part : p.parts) ranges[part.range].counts += part.counts;
  }
}

}  // namespace optstate
