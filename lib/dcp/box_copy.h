// Copying between boxes of one N-d tensor, each held in C order: the bytes a
// DCP chunk shares with another chunk or with the whole tensor. Internal to lib/.
#ifndef OPTSTATE_BOX_COPY_H_
#define OPTSTATE_BOX_COPY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace optstate {

// A box within a tensor: per dimension, where it starts and how long it is.
// A 0-d tensor's box has no dimensions and holds one element.
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

// Copies the elements where `src` and `dst` overlap from src_data (src's
// elements in C order) to their places in dst_data (dst's, in C order).
// REQUIRES: both boxes have the same number of dimensions.
void CopyIntersection(const Box& src, const std::byte* src_data, const Box& dst, std::byte* dst_data, size_t elem);

}  // namespace optstate

#endif  // OPTSTATE_BOX_COPY_H_
