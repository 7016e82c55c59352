#include "state/split_views.h"

#include <algorithm>
#include <numeric>

namespace optstate {

std::vector<int64_t> HeavyBallMergedShape(const std::vector<int64_t>& shape, int64_t max_dim) {
  if (shape.empty()) return {};
  std::vector<int64_t> reversed;  // merged trailing groups, last first
  int64_t current = 1;
  for (size_t i = shape.size(); i-- > 1;) {
    const int64_t s = shape[i];
    if (current * s > max_dim) {
      if (current > 1) {
        reversed.push_back(current);
        current = s;
      } else {
        reversed.push_back(s);
        current = 1;
      }
    } else {
      current *= s;
    }
  }
  if (current > 1) reversed.push_back(current);
  std::vector<int64_t> out{shape[0]};
  out.insert(out.end(), reversed.rbegin(), reversed.rend());
  return out;
}

std::optional<std::vector<size_t>> HeavyBallSplitOrder(const std::vector<int64_t>& param_shape,
                                                       const std::vector<ViewPlacement>& views) {
  int64_t max_dim = 1;
  for (const ViewPlacement& v : views) {
    for (int64_t d : v.shape) max_dim = std::max(max_dim, d);
  }
  const std::vector<int64_t> merged = HeavyBallMergedShape(param_shape, max_dim);
  // HeavyBall squeezes dims of 1 before splitting; views of such a shape are
  // not placed here.
  std::vector<int64_t> strides(merged.size(), 1);
  for (size_t d = merged.size(); d-- > 1;) strides[d - 1] = strides[d] * merged[d];
  std::vector<std::vector<int64_t>> starts;
  for (const ViewPlacement& v : views) {
    if (v.shape.size() != merged.size()) return std::nullopt;
    std::vector<int64_t> c(merged.size());
    auto rest = static_cast<int64_t>(v.offset);
    for (size_t d = 0; d < merged.size(); ++d) {
      c[d] = rest / strides[d];
      rest %= strides[d];
      if (c[d] + v.shape[d] > merged[d] || c[d] % max_dim != 0) return std::nullopt;
    }
    starts.push_back(std::move(c));
  }
  std::vector<size_t> order(views.size());
  std::iota(order.begin(), order.end(), 0);
  // Split along the last dimension first: blocks ordered by their start
  // coordinates compared from the last dimension to the first.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::lexicographical_compare(starts[a].rbegin(), starts[a].rend(), starts[b].rbegin(), starts[b].rend());
  });
  return order;
}

}  // namespace optstate
