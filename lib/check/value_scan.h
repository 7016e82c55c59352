// validate's value pass: every stored zip record read once, on both cores,
// computing its CRC-32 and counting the values of the tensors that lie in it
// (non-finite, negative, non-zero) in the same sweep, while the bytes are in
// cache. Internal to lib/.
#ifndef OPTSTATE_VALUE_SCAN_H_
#define OPTSTATE_VALUE_SCAN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/file_io.h"
#include "optstate/torch_objects.h"

namespace optstate {

struct ValueCounts {
  uint64_t nonfinite = 0, negative = 0, nonzero = 0;
  ValueCounts& operator+=(const ValueCounts& o) {
    nonfinite += o.nonfinite, negative += o.negative, nonzero += o.nonzero;
    return *this;
  }
};

// The counts of `bytes` read as elements of a floating dtype (float32, float64,
// bfloat16, float16); a partial trailing element is ignored.
ValueCounts CountValues(ByteSpan bytes, DType dtype);

struct ScanRecord {
  ByteSpan bytes;      // the record's data where it lies in the mapped file
  uint32_t crc = 0;    // out: its CRC-32
};

struct ScanRange {
  ByteSpan bytes;      // a tensor's elements, inside one record or on their own
  DType dtype = DType::kFloat32;
  ValueCounts counts;  // out
};

// Where the bytes come from. Spans always name the data by its address in a
// mapped (or decompressed) buffer; when `locate` gives a stretch's place in
// the file, it is read with pread into a small buffer instead: on a warm page
// cache that is faster than faulting the mapping in and dropping it again
// (3.2 GiB on 2 cores: 0.24 s against 0.31-0.36 s), and nothing stays resident.
struct ScanHooks {
  std::function<std::optional<FileRange>(ByteSpan)> locate;
};

// Records whose bytes reading the local headers brought in anyway
// (ReadOptions::record_bytes_read, on the thread beside the pickle's parse),
// swept there: on a 0.5 GB file of 4 * 10^4 tensors of 16 KiB those reads
// copy most of the file, and the value pass read it all a second time. Only
// what a record's own sweep gives is kept: its CRC and its counts read as
// float32 (the dtype is not known before the parse), 32 bytes a record.
class SweptRecords {
 public:
  // Records between these sizes are left to the value pass, which reads
  // neighbours in one call anyway: a checkpoint of 10^6 small parameters would
  // keep 32 bytes for each of 3 * 10^6 records and save little. The tiny ones
  // (a parameter's `step`) are kept: left to the value pass between swept
  // records, each was a read of its own.
  static constexpr size_t kMaxTinyBytes = 8;
  static constexpr size_t kMinBytes = 4096;
  struct Swept {
    const std::byte* data;  // where the record lies in the checkpoint's bytes
    uint32_t size;
    uint32_t crc;
    uint32_t nonfinite, negative, nonzero;  // read as float32
  };
  // Called once per record, from one thread at a time.
  void Sweep(ByteSpan where, ByteSpan bytes);
  // Once every Sweep is done: orders them for Find.
  void Seal();
  // The record whose data is exactly `where`, or nullptr.
  const Swept* Find(ByteSpan where) const;
  size_t size() const { return swept_.size(); }

 private:
  std::vector<Swept> swept_;
};

// Fills every record's crc and every range's counts. A range inside a record
// is counted in that record's sweep; one outside every record on its own.
// Ranges must start at an element boundary counted from their record's start
// (torch stores a tensor at a multiple of its element size in its storage).
// A record `swept` holds is not read again (a range inside it then reads
// just its own bytes), nor is a float32 range that is the whole of one.
void ScanRecordsAndRanges(std::vector<ScanRecord>& records, std::vector<ScanRange>& ranges, const ScanHooks& hooks,
                          int threads = 2, const SweptRecords* swept = nullptr);

}  // namespace optstate

#endif  // OPTSTATE_VALUE_SCAN_H_
