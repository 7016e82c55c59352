// Resolving every record's data offset: one local header per record, read
// from the file by windows.
//
// validate reads each record's local header before its values. One pread per
// header was a system call per record: 4 * 10^5 of them at 10^5 parameters
// (~1 s of validate's 3.7 s on a virtual machine, where a system call costs
// several microseconds) and 4 * 10^4 for a 0.5 GB file of 16 KiB tensors
// (0.1 s of 0.45 s). torch.save writes the records one after the other, so
// the headers that follow one another within a window of the file come in one
// read; the bytes between them are copied and not looked at, which costs less
// than the calls as long as the window is small.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "io/byte_cursor.h"
#include "zip/zip_archive.h"

namespace optstate {
namespace {

constexpr uint64_t kHeaderWindow = 128 << 10;

// The headers of `entries` from `first` on, in directory order, unresolved,
// whose fixed parts follow one another within kHeaderWindow bytes from entry
// `first`'s header: one past the last of them, and where its fixed part ends.
// Just `first` (end 0) when its own header is resolved or out of the file.
std::pair<size_t, uint64_t> HeadersInWindow(const std::vector<ZipEntry>& entries, size_t first, uint64_t file_size) {
  if (entries[first].data_offset_known || !LocalHeaderFits(entries[first], file_size)) return {first + 1, 0};
  const uint64_t start = entries[first].local_header_offset;
  const uint64_t limit = std::min(file_size, start + kHeaderWindow);
  uint64_t end = start + kLocalHeaderFixedBytes;
  size_t next = first + 1;
  for (; next < entries.size(); ++next) {
    const ZipEntry& e = entries[next];
    if (e.data_offset_known || e.local_header_offset < end || !LocalHeaderFits(e, limit)) break;
    end = e.local_header_offset + kLocalHeaderFixedBytes;
  }
  return {next, end};
}

// Where a window from `start` whose headers end at `end` stops reading. With
// a `record_read` to hand them to, it reads on to the next header (or the
// central directory) when that is near: the data of the window's last record
// lies between, and the caller would read it otherwise (a file of 16 KiB
// tensors has seven to a window: the eighth was an eighth of the file).
uint64_t RecordsEnd(const ZipArchive& archive, size_t next, uint64_t start, uint64_t end, uint64_t file_size,
                    const RecordBytesRead& record_read) {
  if (!record_read) return end;
  const uint64_t after =
      next < archive.entries.size() ? archive.entries[next].local_header_offset : archive.directory_offset;
  return after > end && after <= file_size && after - start <= 2 * kHeaderWindow ? after : end;
}

// When `e` (just resolved from `window`, read at `start`) is stored and its
// data lies inside the window: hands it to `record_read`, and keeps it when
// it is tiny.
void UseRecordInWindow(const ZipEntry& e, const ByteCursor& cursor, const std::vector<std::byte>& window,
                       uint64_t start, std::vector<ZipArchive::TinyRecord>& tiny, const RecordBytesRead& record_read) {
  if (e.method != 0 || e.size == 0 || e.compressed_size != e.size) return;
  if (e.data_offset + e.size > start + window.size()) return;
  const std::byte* read = window.data() + (e.data_offset - start);
  if (record_read) record_read(cursor.data().subspan(e.data_offset, e.size), ByteSpan(read, e.size));
  if (e.size > ZipArchive::kTinyRecordBytes) return;
  ZipArchive::TinyRecord r{cursor.data().data() + e.data_offset, {}, static_cast<uint8_t>(e.size)};
  std::memcpy(r.bytes.data(), read, e.size);
  tiny.push_back(r);
}

}  // namespace

Status ResolveZipDataOffsets(const ByteCursor& cursor, ZipArchive& archive,
                             const std::function<void(ByteSpan)>& header_read, int fd,
                             const RecordBytesRead& record_read) {
  std::vector<ZipEntry>& entries = archive.entries;
  if (fd < 0) {
    for (ZipEntry& e : entries) {
      OPTSTATE_ASSIGN_OR_RETURN(e.data_offset, ZipEntryDataOffset(cursor, e));
      e.data_offset_known = true;
      if (header_read) header_read(cursor.data().subspan(e.local_header_offset, e.data_offset - e.local_header_offset));
    }
    return Status();
  }
  std::vector<std::byte> window;
  for (size_t i = 0; i < entries.size();) {
    ZipEntry& e = entries[i];
    const auto [next, end] = HeadersInWindow(entries, i, cursor.size());
    const uint64_t start = e.local_header_offset;
    if (next > i + 1) {
      window.resize(static_cast<size_t>(RecordsEnd(archive, next, start, end, cursor.size(), record_read) - start));
      if (::pread(fd, window.data(), window.size(), static_cast<off_t>(start)) ==
          static_cast<ssize_t>(window.size())) {
        for (; i < next; ++i) {
          ZipEntry& w = entries[i];
          const std::byte* fixed = window.data() + (w.local_header_offset - start);
          OPTSTATE_ASSIGN_OR_RETURN(w.data_offset, DataOffsetFromLocalHeader(cursor, w, fixed));
          w.data_offset_known = true;
          UseRecordInWindow(w, cursor, window, start, archive.tiny_records, record_read);
        }
        continue;
      }
    }
    // One header, or a window read that came up short: the one-header path,
    // which falls back to the cursor and its errors.
    OPTSTATE_ASSIGN_OR_RETURN(e.data_offset, ZipEntryDataOffset(cursor, e, fd));
    e.data_offset_known = true;
    ++i;
  }
  auto by_address = [](const ZipArchive::TinyRecord& a, const ZipArchive::TinyRecord& b) { return a.data < b.data; };
  std::vector<ZipArchive::TinyRecord>& tiny = archive.tiny_records;
  if (!std::is_sorted(tiny.begin(), tiny.end(), by_address)) std::sort(tiny.begin(), tiny.end(), by_address);
  return Status();
}

}  // namespace optstate
