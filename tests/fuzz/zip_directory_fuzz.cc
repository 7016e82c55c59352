// The zip layer: central directory, local headers, data ranges and CRCs.
#include "fuzz_target.h"
#include "io/byte_cursor.h"
#include "zip/zip_archive.h"

OPTSTATE_FUZZ_TARGET(zip_directory) {
  using namespace optstate;
  ByteCursor cursor(fuzz::Bytes(data, size));
  StatusOr<ZipArchive> zip = ReadZipDirectory(cursor);
  if (!zip.ok()) return 0;
  for (const ZipEntry& e : zip->entries) {
    StatusOr<ByteSpan> bytes = ZipEntryData(cursor, e);
    if (bytes.ok() && (bytes->data() < cursor.data().data() ||
                       bytes->data() + bytes->size() > cursor.data().data() + cursor.data().size())) {
      fuzz::FuzzCheckFailed("entry data outside the input");
    }
    (void)VerifyZipEntryCrc(cursor, e);
  }
  (void)ResolveZipDataOffsets(cursor, *zip);
  return 0;
}
