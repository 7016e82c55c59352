#include "zip/zip_writer.h"

#include "io/crc32.h"
#include "io/shared_output_file.h"

#include <algorithm>
#include <vector>

namespace optstate {
namespace {

constexpr uint64_t kAlignment = 64;  // torch's kFieldAlignment, 1.6 through 2.6
constexpr uint64_t k4G = 0xFFFFFFFFull;
constexpr size_t kCopyChunk = 8 << 20;  // bytes written (and pages released) at a time
// Bytes summed, then written, at a time when a piece has no CRC: the write
// copies them while they are still in the core's L2 cache, so each is read from
// memory once, on one thread. The kernel's copy (copy_file_range) would spare
// that read only to have it done again for the CRC, and from an offset that is
// not page-aligned (a parameter inside a partition) it fills the output's page
// cache a 4 KiB page at a time, where writes from memory get large folios
// (BENCHMARKS.md, issue 22: ~37,000 page-cache allocations instead of ~250,000
// for a 2.3 GiB ZeRO-3 consolidate; level with cp in most runs).
constexpr size_t kSumStep = 1 << 20;
// A record the kernel copies whole from another file starts at the same offset
// within 64 KiB as it did there. The kernel's copy hands the source's page-cache
// folios to the output's write; where the two offsets disagree the output gets
// small folios, and its per-folio work (locking, buffer heads, accounting) is
// most of the copy's cost beside the memcpy: 1 GiB took 0.24-0.29 s at the same
// offset within 4 KiB only, 0.18-0.21 s within 64 KiB or more (BENCHMARKS.md,
// bench/copy_phase_bench.py). The padding (under 64 KiB, what an extra field
// holds) is for records of 4 MiB and more, at most 1.6% of the record.
constexpr uint64_t kCopyPhaseBytes = 64 << 10;
constexpr uint64_t kSamePhaseRecordBytes = 4 << 20;

void U16(std::string& s, uint64_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>((v >> 8) & 0xFF);
}
void U32(std::string& s, uint64_t v) {
  U16(s, v & 0xFFFF);
  U16(s, (v >> 16) & 0xFFFF);
}
void U64(std::string& s, uint64_t v) {
  U32(s, v & 0xFFFFFFFF);
  U32(s, v >> 32);
}

// Gathers small writes (local headers, descriptors, small records) into one
// buffer written out at 1 MiB: a checkpoint of 10^5 parameters has 4 * 10^5
// records, and three system calls each were most of writing it. Large writes
// and kernel copies pass straight through, after what is buffered.
class CoalescingStream : public OutputStream {
 public:
  explicit CoalescingStream(std::unique_ptr<OutputStream> out) : out_(std::move(out)) {}

  Status Write(ByteSpan data) override {
    if (data.size() >= kPassThrough) {
      OPTSTATE_RETURN_IF_ERROR(Flush());
      return out_->Write(data);
    }
    if (pending_.size() + data.size() > kBuffer) OPTSTATE_RETURN_IF_ERROR(Flush());
    pending_.insert(pending_.end(), data.begin(), data.end());
    return Status();
  }
  StatusOr<uint64_t> CopyFromFile(int fd, uint64_t offset, uint64_t length) override {
    OPTSTATE_RETURN_IF_ERROR(Flush());
    return out_->CopyFromFile(fd, offset, length);
  }
  uint64_t position() const override { return out_->position() + pending_.size(); }
  Status Commit() override {
    OPTSTATE_RETURN_IF_ERROR(Flush());
    return out_->Commit();
  }

 private:
  static constexpr size_t kBuffer = 1 << 20;
  static constexpr size_t kPassThrough = 64 << 10;

  Status Flush() {
    if (pending_.empty()) return Status();
    Status s = out_->Write(ByteSpan(pending_.data(), pending_.size()));
    pending_.clear();
    return s;
  }

  std::unique_ptr<OutputStream> out_;
  std::vector<std::byte> pending_;
};

}  // namespace

StatusOr<std::unique_ptr<ZipWriter>> ZipWriter::Create(const std::string& path, std::string prefix, bool zstd,
                                                       Durability durability) {
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    return InvalidArgumentError("zip archive directory '" + prefix + "' must be one non-empty path component");
  }
  OPTSTATE_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Create(path, durability));
  std::unique_ptr<OutputStream> out = std::move(file);
  if (zstd) {
    OPTSTATE_ASSIGN_OR_RETURN(out, MakeZstdOutput(std::move(out)));
  }
  out = std::make_unique<CoalescingStream>(std::move(out));
  return std::unique_ptr<ZipWriter>(new ZipWriter(std::move(out), std::move(prefix)));
}

namespace {

// A window on another stream: positions count from where the window opened,
// and committing is the owner's business.
class EmbeddedStream : public OutputStream {
 public:
  explicit EmbeddedStream(OutputStream& parent) : parent_(parent), base_(parent.position()) {}
  Status Write(ByteSpan data) override { return parent_.Write(data); }
  StatusOr<uint64_t> CopyFromFile(int fd, uint64_t offset, uint64_t length) override {
    return parent_.CopyFromFile(fd, offset, length);
  }
  uint64_t position() const override { return parent_.position() - base_; }
  Status Commit() override { return Status(); }

 private:
  OutputStream& parent_;
  uint64_t base_;
};

}  // namespace

std::unique_ptr<ZipWriter> ZipWriter::CreateEmbedded(OutputStream& parent, std::string prefix) {
  return std::unique_ptr<ZipWriter>(
      new ZipWriter(std::make_unique<CoalescingStream>(std::make_unique<EmbeddedStream>(parent)), std::move(prefix)));
}

std::unique_ptr<ZipWriter> ZipWriter::CreateShared(SharedOutputFile& file, std::string prefix) {
  return std::unique_ptr<ZipWriter>(new ZipWriter(std::make_unique<EmbeddedStream>(file), std::move(prefix), &file));
}

Status ZipWriter::AddSkippedRecord(const std::string& record, uint64_t size) {
  if (!shared_) return InternalError("zip record '" + record + "' skipped in a zip only one process writes");
  const bool writing = shared_->writing();
  shared_->set_writing(false);
  Status laid_out = Header(record, size);
  shared_->Skip(size);
  if (laid_out.ok()) laid_out = Descriptor(0);
  shared_->set_writing(writing);
  return laid_out;
}

std::vector<uint32_t> ZipWriter::RecordCrcs() const {
  std::vector<uint32_t> crcs;
  crcs.reserve(entries_.size());
  for (const Entry& e : entries_) crcs.push_back(e.crc);
  return crcs;
}

Status ZipWriter::SetRecordCrc(size_t record, uint32_t crc) {
  if (record >= entries_.size()) return InternalError("zip record " + std::to_string(record) + " was never laid out");
  entries_[record].crc = crc;
  return Status();
}

Status ZipWriter::Put(const std::string& bytes) { return out_->Write(AsBytes(bytes)); }

StatusOr<uint32_t> ZipWriter::WriteSummed(ByteSpan data, const std::function<void(ByteSpan)>& done_with) {
  uint32_t crc = 0;
  for (size_t at = 0; at < data.size(); at += kCopyChunk) {
    ByteSpan chunk = data.subspan(at, std::min(kCopyChunk, data.size() - at));
    for (size_t step = 0; step < chunk.size(); step += kSumStep) {
      ByteSpan bytes = chunk.subspan(step, std::min(kSumStep, chunk.size() - step));
      crc = Crc32(bytes, crc);
      OPTSTATE_RETURN_IF_ERROR(out_->Write(bytes));
    }
    if (done_with) done_with(chunk);
  }
  return crc;
}

StatusOr<uint32_t> ZipWriter::WritePiece(const RecordPiece& p, const std::function<void(ByteSpan)>& done_with) {
  if (!p.crc) return WriteSummed(p.data, done_with);
  uint64_t copied = 0;  // by the kernel, in one go: these pages are never mapped in here
  if (p.source) {
    OPTSTATE_ASSIGN_OR_RETURN(copied, out_->CopyFromFile(p.source->fd, p.source->offset, p.data.size()));
  }
  for (size_t at = static_cast<size_t>(copied); at < p.data.size(); at += kCopyChunk) {
    ByteSpan chunk = p.data.subspan(at, std::min(kCopyChunk, p.data.size() - at));
    OPTSTATE_RETURN_IF_ERROR(out_->Write(chunk));
    if (done_with) done_with(chunk);
  }
  return *p.crc;
}

Status ZipWriter::AddRecord(const std::string& record, ByteSpan data, const std::function<void(ByteSpan)>& done_with,
                            std::optional<uint32_t> known_crc, std::optional<FileRange> source) {
  // Only where the layout is this process's alone: processes sharing a zip
  // lay out records they do not copy (AddSkippedRecord) without a source.
  std::optional<uint64_t> phase;
  if (source && known_crc && !shared_ && data.size() >= kSamePhaseRecordBytes && source->offset % kAlignment == 0) {
    phase = source->offset % kCopyPhaseBytes;
  }
  OPTSTATE_RETURN_IF_ERROR(Header(record, data.size(), phase));
  OPTSTATE_ASSIGN_OR_RETURN(uint32_t crc, WritePiece(RecordPiece{data, known_crc, source}, done_with));
  return Descriptor(crc);
}

Status ZipWriter::AddRecordPieces(const std::string& record, const std::vector<RecordPiece>& pieces,
                                  const std::function<void(ByteSpan)>& done_with) {
  uint64_t total = 0;
  for (const RecordPiece& p : pieces) total += p.data.size();
  OPTSTATE_RETURN_IF_ERROR(Header(record, total));
  // A piece cut from a record (a reshard's chunk from an input chunk, a ZeRO-3
  // parameter from a rank's partition) has no CRC anywhere: WritePiece sums it
  // and writes it from here, whatever its source.
  uint32_t crc = 0;
  for (const RecordPiece& p : pieces) {
    OPTSTATE_ASSIGN_OR_RETURN(uint32_t piece_crc, WritePiece(p, done_with));
    crc = Crc32Combine(crc, piece_crc, p.data.size());
  }
  return Descriptor(crc);
}

Status ZipWriter::BeginRecord(const std::string& record) {
  OPTSTATE_RETURN_IF_ERROR(Header(record, 0));
  streaming_ = true;
  streamed_crc_ = 0;
  return Status();
}

Status ZipWriter::AppendToRecord(ByteSpan data) {
  if (!streaming_) return InternalError("zip record appended to before BeginRecord");
  Entry& e = entries_.back();
  // The local header said 32-bit sizes (or zip64 for the offset alone):
  // the descriptor must agree, so the record stays below 4 GiB.
  if (data.size() >= k4G - e.size) {
    return LimitExceededError("a zip record written as it is made is limited to 4 GiB");
  }
  streamed_crc_ = Crc32(data, streamed_crc_);
  e.size += data.size();
  return out_->Write(data);
}

Status ZipWriter::EndRecord() {
  if (!streaming_) return InternalError("zip record ended before BeginRecord");
  streaming_ = false;
  return Descriptor(streamed_crc_);
}

Status ZipWriter::AddZeroRecord(const std::string& record, uint64_t size) {
  static const std::vector<std::byte> kZeros(1 << 16);
  OPTSTATE_RETURN_IF_ERROR(Header(record, size));
  uint32_t crc = 0;
  for (uint64_t left = size; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, kZeros.size()));
    crc = Crc32(ByteSpan(kZeros.data(), n), crc);
    OPTSTATE_RETURN_IF_ERROR(out_->Write(ByteSpan(kZeros.data(), n)));
    left -= n;
  }
  return Descriptor(crc);
}

// Local header of a stored record. Bit 3 says the CRC follows the data in a
// descriptor; the sizes are known up front and given here too.
Status ZipWriter::Header(const std::string& record, uint64_t size, std::optional<uint64_t> phase) {
  if (streaming_) return InternalError("zip record '" + record + "' begun before the streamed record ended");
  const std::string name = prefix_ + "/" + record;
  Entry e{names_.size(), static_cast<uint32_t>(name.size()), 0, size, out_->position()};
  names_ += name;
  bool zip64 = e.size >= k4G || e.local_offset >= k4G;
  std::string h;
  U32(h, 0x04034b50);
  U16(h, zip64 ? 45 : 20);  // version needed
  U16(h, 0x0808);           // data descriptor follows; UTF-8 names
  U16(h, 0);                // stored
  U16(h, 0);                // time
  U16(h, 0);                // date
  U32(h, 0);                // CRC: in the descriptor
  U32(h, zip64 ? k4G : e.size);
  U32(h, zip64 ? k4G : e.size);
  U16(h, name.size());
  std::string extra;
  if (zip64) {
    U16(extra, 0x0001);
    U16(extra, 16);
    U64(extra, e.size);
    U64(extra, e.size);
  }
  // Pad with an 'FB' extra field so the data starts on a 64-byte boundary
  // (or at `phase` within 64 KiB, itself a multiple of 64).
  uint64_t data_at = e.local_offset + 30 + name.size() + extra.size() + 4;
  uint64_t pad = phase ? (kCopyPhaseBytes + *phase - data_at % kCopyPhaseBytes) % kCopyPhaseBytes
                       : (kAlignment - data_at % kAlignment) % kAlignment;
  U16(extra, 0x4246);  // "FB"
  U16(extra, pad);
  extra.append(pad, 'Z');
  U16(h, extra.size());
  h += name;
  h += extra;
  OPTSTATE_RETURN_IF_ERROR(Put(h));
  entries_.push_back(e);
  return Status();
}

Status ZipWriter::Descriptor(uint32_t crc) {
  Entry& e = entries_.back();
  e.crc = crc;
  std::string d;
  U32(d, 0x08074b50);
  U32(d, crc);
  if (e.size >= k4G || e.local_offset >= k4G) {
    U64(d, e.size);
    U64(d, e.size);
  } else {
    U32(d, e.size);
    U32(d, e.size);
  }
  return Put(d);
}

Status ZipWriter::Finish() {
  if (streaming_) return InternalError("zip finished before the streamed record ended");
  uint64_t cd_start = out_->position();
  uint64_t cd_size = 0;
  std::string cd;
  for (const Entry& e : entries_) {
    // Written a stretch at a time: whole, it was 50 MB at 4 * 10^5 records.
    if (cd.size() >= (1u << 20)) {
      cd_size += cd.size();
      OPTSTATE_RETURN_IF_ERROR(Put(cd));
      cd.clear();
    }
    bool big_size = e.size >= k4G;
    bool big_offset = e.local_offset >= k4G;
    std::string extra;
    if (big_size || big_offset) {
      U16(extra, 0x0001);
      U16(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
      if (big_size) {
        U64(extra, e.size);
        U64(extra, e.size);
      }
      if (big_offset) U64(extra, e.local_offset);
    }
    U32(cd, 0x02014b50);
    U16(cd, 45);  // made by
    U16(cd, (big_size || big_offset) ? 45 : 20);
    U16(cd, 0x0800);
    U16(cd, 0);
    U16(cd, 0);
    U16(cd, 0);
    U32(cd, e.crc);
    U32(cd, big_size ? k4G : e.size);
    U32(cd, big_size ? k4G : e.size);
    U16(cd, e.name_size);
    U16(cd, extra.size());
    U16(cd, 0);  // comment
    U16(cd, 0);  // disk
    U16(cd, 0);  // internal attributes
    U32(cd, 0);  // external attributes
    U32(cd, big_offset ? k4G : e.local_offset);
    cd.append(names_, e.name_at, e.name_size);
    cd += extra;
  }
  cd_size += cd.size();
  uint64_t z64_at = cd_start + cd_size;
  // zip64 end of central directory + locator, always (as torch's writer does).
  U32(cd, 0x06064b50);
  U64(cd, 44);
  U16(cd, 45);
  U16(cd, 45);
  U32(cd, 0);
  U32(cd, 0);
  U64(cd, entries_.size());
  U64(cd, entries_.size());
  U64(cd, cd_size);
  U64(cd, cd_start);
  U32(cd, 0x07064b50);
  U32(cd, 0);
  U64(cd, z64_at);
  U32(cd, 1);
  // Classic end record, saturated where zip64 holds the real values.
  U32(cd, 0x06054b50);
  U16(cd, 0);
  U16(cd, 0);
  U16(cd, std::min<uint64_t>(entries_.size(), 0xFFFF));
  U16(cd, std::min<uint64_t>(entries_.size(), 0xFFFF));
  U32(cd, std::min<uint64_t>(cd_size, k4G));
  U32(cd, std::min<uint64_t>(cd_start, k4G));
  U16(cd, 0);
  OPTSTATE_RETURN_IF_ERROR(Put(cd));
  return out_->Commit();
}

}  // namespace optstate
