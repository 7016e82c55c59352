// Writes a zip the way torch.save does, so that torch (1.6 through 2.6) reads it
// and can mmap it: every record stored, its data 64-byte aligned through an 'FB'
// padding extra field, the CRC-32 in a data descriptor after the data (as torch
// writes it, so each byte is read once), zip64 end records always present,
// zip64 extra fields where a size or offset reaches 4 GiB. Records stream to an
// AtomicFileWriter: nothing appears at the final path until Finish() succeeds.
#ifndef OPTSTATE_ZIP_WRITER_H_
#define OPTSTATE_ZIP_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/file_io.h"
#include "optstate/status.h"

namespace optstate {

class SharedOutputFile;

class ZipWriter {
 public:
  // `prefix` is the archive's top directory ("archive" for in-memory saves).
  // `zstd`: the whole zip goes through a zstd compressor (a .zst file that
  // optstate reads directly and `zstd -d` turns back into the zip).
  static StatusOr<std::unique_ptr<ZipWriter>> Create(const std::string& path, std::string prefix,
                                                     bool zstd = false, Durability durability = Durability::kSynced);

  // A zip written into `parent` from its current position on, as one item of a
  // larger file: its offsets count from that position, and Finish() writes the
  // central directory but leaves committing `parent` to its owner. `parent`
  // must outlive the writer.
  static std::unique_ptr<ZipWriter> CreateEmbedded(OutputStream& parent, std::string prefix);

  // A zip whose bytes several processes write into one file (SharedOutputFile):
  // every process lays out every record, writing only its own (the file's
  // set_writing says which); AddSkippedRecord lays out another's. Finish
  // writes the central directory and leaves committing `file` to its owner.
  static std::unique_ptr<ZipWriter> CreateShared(SharedOutputFile& file, std::string prefix);
  // Lays out a record of `size` bytes that another process writes: its header,
  // data and descriptor move the position and nothing is written here.
  Status AddSkippedRecord(const std::string& name, uint64_t size);
  // The CRC-32 of each record so far, in order (0 for skipped ones), and the
  // one another process computed, for the central directory.
  std::vector<uint32_t> RecordCrcs() const;
  size_t record_count() const { return entries_.size(); }
  Status SetRecordCrc(size_t record, uint32_t crc);

  // Adds "<prefix>/<name>" holding `data`.
  // `done_with` (optional) is called with each chunk once it has been written,
  // so a caller copying from a mapped file can release its pages.
  // `known_crc`: the CRC-32 of `data` when the caller already has it (a record
  // copied whole from another zip). Then, if `source` says where `data` lies in
  // a file, the kernel copies it (copy_file_range) and the bytes never pass
  // through this process; otherwise `data` is written.
  Status AddRecord(const std::string& name, ByteSpan data,
                   const std::function<void(ByteSpan)>& done_with = nullptr,
                   std::optional<uint32_t> known_crc = std::nullopt,
                   std::optional<FileRange> source = std::nullopt);
  // Adds a record made of `pieces` in order. Its CRC is combined from the
  // pieces': pieces with a known CRC and a source are copied by the kernel and
  // never pass through this process; the others are written from `data`,
  // those without a CRC summed on the way.
  Status AddRecordPieces(const std::string& name, const std::vector<RecordPiece>& pieces,
                         const std::function<void(ByteSpan)>& done_with = nullptr);
  // A record whose size is known only at its end (data.pkl, written as the
  // pickle is made rather than held whole): BeginRecord, any number of
  // AppendToRecord, EndRecord, with no other record in between. Its local
  // header gives sizes 0, as bit 3 allows (Python's zipfile does the same on
  // unseekable outputs); the descriptor and the central directory give them.
  // At most 4 GiB - 1.
  Status BeginRecord(const std::string& name);
  Status AppendToRecord(ByteSpan data);
  Status EndRecord();
  // Adds a record of `size` zero bytes, streamed without allocating them.
  Status AddZeroRecord(const std::string& name, uint64_t size);
  // Central directory and end records, then the atomic rename.
  Status Finish();
  uint64_t bytes_written() const { return out_->position(); }  // of the zip, before compression

 private:
  // 4 * 10^5 records in a save of 10^5 parameters: names live in one
  // string (names_), each entry is 32 bytes.
  struct Entry {
    uint64_t name_at;
    uint32_t name_size;
    uint32_t crc;
    uint64_t size;
    uint64_t local_offset;
  };
  ZipWriter(std::unique_ptr<OutputStream> out, std::string prefix, SharedOutputFile* shared = nullptr)
      : out_(std::move(out)), prefix_(std::move(prefix)), shared_(shared) {}
  Status Put(const std::string& bytes);
  Status Header(const std::string& record, uint64_t size, std::optional<uint64_t> phase = std::nullopt);
  Status Descriptor(uint32_t crc);
  // Writes one piece of a record and returns its CRC-32: with a known CRC,
  // copied by the kernel from its source if it has one, else written a chunk
  // at a time; without, summed and written (WriteSummed). Each chunk written
  // from memory is handed to `done_with` (if any) once written.
  StatusOr<uint32_t> WritePiece(const RecordPiece& p, const std::function<void(ByteSpan)>& done_with);
  StatusOr<uint32_t> WriteSummed(ByteSpan data, const std::function<void(ByteSpan)>& done_with);

  std::unique_ptr<OutputStream> out_;
  std::string prefix_;
  SharedOutputFile* shared_;  // CreateShared's file, else null
  std::vector<Entry> entries_;
  std::string names_;
  bool streaming_ = false;   // between BeginRecord and EndRecord
  uint32_t streamed_crc_ = 0;
};

}  // namespace optstate

#endif  // OPTSTATE_ZIP_WRITER_H_
