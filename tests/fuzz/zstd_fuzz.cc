// A .zst checkpoint: frames decompressed under a cap (a bomb is refused at the
// cap, never allocated beyond it), then parsed as any checkpoint.
#include "fuzz_target.h"
#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"
#include "torch/container.h"

OPTSTATE_FUZZ_TARGET(zstd) {
  using namespace optstate;
  constexpr uint64_t kCap = 1u << 20;  // small: a zero-filled 64 MiB per input made this target run at 16 exec/s
  StatusOr<std::vector<std::byte>> plain = DecompressZstd(fuzz::Bytes(data, size), kCap);
  if (!plain.ok()) return 0;
  if (plain->size() > kCap) fuzz::FuzzCheckFailed("decompressed past the cap");
  ReadOptions options;
  options.pickle.max_nodes = 1u << 20;
  (void)ParseCheckpoint(ByteCursor(ByteSpan(plain->data(), plain->size())), options);
  return 0;
}
