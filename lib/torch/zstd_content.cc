// DecompressZstd (optstate/checkpoint.h): the content of a .zst checkpoint,
// with every size the frames declare checked against the cap before anything
// is allocated.
#include <zstd.h>
#include <zstd_errors.h>

#include <new>
#include <string>
#include <vector>

#include "io/byte_cursor.h"
#include "optstate/checkpoint.h"

namespace optstate {

StatusOr<std::vector<std::byte>> DecompressZstd(ByteSpan in, uint64_t cap) {
  // A bomb that declares its size (zstd writes it for files) is refused before
  // anything is allocated; one that does not stops at the cap.
  unsigned long long declared = 0;
  bool all_declared = true;
  for (size_t at = 0; at < in.size();) {  // every frame's header
    // zstd before 1.0 (2016) had other frame formats; libzstd may still decode
    // them with old code that sizes its buffers by the frame alone. No torch
    // checkpoint was ever written that way.
    if (in.size() - at >= 4) {
      uint32_t magic = LoadU32LEUnchecked(in.data() + at);
      if (magic >= 0xFD2FB521u && magic <= 0xFD2FB527u) {
        return UnsupportedError("zstd frame at input offset " + std::to_string(at) + " is in the pre-1.0 format v0." +
                                std::to_string(magic - 0xFD2FB520u) + "; only zstd 1.x frames are read");
      }
    }
    size_t frame = ZSTD_findFrameCompressedSize(in.data() + at, in.size() - at);
    if (ZSTD_isError(frame)) {  // decompression below names the error
      all_declared = false;
      break;
    }
    unsigned long long content = ZSTD_getFrameContentSize(in.data() + at, in.size() - at);
    if (content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR) {
      all_declared = false;
    } else {  // saturating: many frames may each declare nearly 2^64
      declared = content > ~0ull - declared ? ~0ull : declared + content;
    }
    at += frame;
  }
  if (declared > cap) {
    return LimitExceededError("zstd frames declare " + std::to_string(declared) + " bytes of content, more than " +
                              std::to_string(cap) + " (limit max_decompressed_bytes; inspect --max-decompressed-bytes)");
  }
  std::vector<std::byte> out;
  ZSTD_DStream* stream = ZSTD_createDStream();
  if (stream == nullptr) return LimitExceededError("out of memory for zstd");
  // A frame that does not declare its size allocates the window it declares
  // (up to 128 MiB) before producing a byte. Content past the cap is refused
  // anyway, so no window need be larger than the cap rounded up to a power of two.
  // 10 and 27 are zstd's smallest window and its default limit (named only in
  // zstd's unstable API).
  int window_log_max = 10;
  while (window_log_max < 27 && (uint64_t{1} << window_log_max) < cap) ++window_log_max;
  ZSTD_DCtx_setParameter(stream, ZSTD_d_windowLogMax, window_log_max);
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  size_t rc = 1;
  // The output holds at most cap + 1 bytes: one byte past the cap is enough to
  // know the content exceeds it. Declared content gets its buffer at once (+1
  // so the end shows; no copies, no doubling of peak memory); otherwise the
  // buffer starts small and doubles. Either way only what zstd is about to fill
  // is touched (zeroed), at most kStep ahead, so a header that lies about its
  // size costs address space, not memory.
  constexpr uint64_t kFirstGuess = 64 << 10;
  constexpr uint64_t kStep = 1 << 20;
  const uint64_t most = std::min<uint64_t>(cap, ~0ull - 1) + 1;
  try {
    out.reserve(std::min<uint64_t>(all_declared ? declared + 1 : kFirstGuess, most));
    while (out.size() < most) {
      size_t old = out.size();
      if (out.capacity() == old) out.reserve(std::min<uint64_t>(std::max<uint64_t>(2 * old, kFirstGuess), most));
      size_t room = std::min<uint64_t>({out.capacity(), most, old + kStep}) - old;
      out.resize(old + room);
      ZSTD_outBuffer dst{out.data() + old, room, 0};
      rc = ZSTD_decompressStream(stream, &dst, &src);
      out.resize(old + dst.pos);
      if (ZSTD_isError(rc)) break;
      // Checkpoints (float bytes) compress a few-fold; a thousandfold
      // expansion past 16 MiB is a decompression bomb, refused before it
      // takes the memory it asks for (zstd writes such content from a few KB).
      if (out.size() > (16u << 20) && out.size() / 1024 > src.pos) {
        ZSTD_freeDStream(stream);
        return LimitExceededError("zstd content expands more than 1024-fold (" + std::to_string(out.size()) +
                                  " bytes from the first " + std::to_string(src.pos) +
                                  " compressed bytes): a decompression bomb, or content of almost nothing but "
                                  "zeros; decompress it yourself (zstd -d) to read such a file");
      }
      if (rc == 0 && src.pos == src.size) break;          // frame(s) complete
      if (src.pos == src.size && dst.pos < room) break;  // input ran out mid-frame
    }
  } catch (const std::bad_alloc&) {
    ZSTD_freeDStream(stream);
    return LimitExceededError("out of memory decompressing zstd after " + std::to_string(out.size()) +
                              " bytes");
  }
  ZSTD_freeDStream(stream);
  if (ZSTD_isError(rc) && ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) {
    return LimitExceededError("zstd frame at input offset " + std::to_string(src.pos) +
                              " needs a window larger than " + std::to_string(uint64_t{1} << window_log_max) +
                              " bytes (limit max_decompressed_bytes, " + std::to_string(cap) + ")");
  }
  if (ZSTD_isError(rc)) {
    // zstd reports no position with an error: what it had consumed and produced
    // before the failing call is where the damage lies beyond.
    std::string declared_note =
        all_declared ? "; the frames declare " + std::to_string(declared) + " bytes of content" : "";
    return CorruptError("zstd: " + std::string(ZSTD_getErrorName(rc)) + " beyond input offset " +
                        std::to_string(src.pos) + " and content byte " + std::to_string(out.size()) + declared_note);
  }
  if (out.size() > cap) {
    return LimitExceededError("zstd content exceeds " + std::to_string(cap) +
                              " bytes (limit max_decompressed_bytes)");
  }
  if (rc != 0) return TruncatedError("zstd stream ends inside a frame");
  return out;
}

}  // namespace optstate
