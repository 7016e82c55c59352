#include "dcp/box_copy.h"

#include <algorithm>
#include <cstring>

namespace optstate {

void CopyIntersection(const Box& src, const std::byte* src_data, const Box& dst, std::byte* dst_data, size_t elem) {
  const size_t n = src.sizes.size();
  if (n == 0) {
    std::memcpy(dst_data, src_data, elem);
    return;
  }
  std::vector<int64_t> lo(n), hi(n);
  for (size_t d = 0; d < n; ++d) {
    lo[d] = std::max(src.offsets[d], dst.offsets[d]);
    hi[d] = std::min(src.offsets[d] + src.sizes[d], dst.offsets[d] + dst.sizes[d]);
    if (lo[d] >= hi[d]) return;  // no overlap
  }
  // C-order strides (in elements) of both boxes.
  std::vector<int64_t> src_stride(n), dst_stride(n);
  src_stride[n - 1] = dst_stride[n - 1] = 1;
  for (size_t d = n - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src.sizes[d];
    dst_stride[d - 1] = dst_stride[d] * dst.sizes[d];
  }
  const size_t row = static_cast<size_t>(hi[n - 1] - lo[n - 1]) * elem;
  std::vector<int64_t> at(lo);  // the current index, over all dimensions but the last
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < n; ++d) {
      s += (at[d] - src.offsets[d]) * src_stride[d];
      t += (at[d] - dst.offsets[d]) * dst_stride[d];
    }
    std::memcpy(dst_data + static_cast<size_t>(t) * elem, src_data + static_cast<size_t>(s) * elem, row);
    size_t d = n - 1;
    while (d > 0) {
      if (++at[d - 1] < hi[d - 1]) break;
      at[d - 1] = lo[d - 1];
      --d;
    }
    if (d == 0) return;
  }
}

}  // namespace optstate
