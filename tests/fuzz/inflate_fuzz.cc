// Raw DEFLATE on any bytes: never reads or writes out of bounds, never grows
// past its cap, and a stream that inflates is a fixed point of nothing else.
#include "fuzz_target.h"
#include "zip/inflate.h"

OPTSTATE_FUZZ_TARGET(inflate) {
  using namespace optstate;
  constexpr uint64_t kCap = 1u << 20;
  StatusOr<std::vector<std::byte>> out = InflateRaw(fuzz::Bytes(data, size), kCap);
  if (out.ok() && out->size() > kCap) fuzz::FuzzCheckFailed("inflate went past its cap");
  return 0;
}
