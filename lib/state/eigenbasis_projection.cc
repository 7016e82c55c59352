#include "state/eigenbasis_projection.h"

#include <cstddef>

namespace optstate {

std::vector<float> ProjectIntoEigenbasis(std::span<const float> x, const std::vector<int64_t>& shape,
                                         const std::vector<Basis>& bases) {
  std::vector<double> cur(x.begin(), x.end()), next;
  for (size_t d = 0; d < shape.size() && d < bases.size(); ++d) {
    if (bases[d].empty()) continue;
    const auto n = static_cast<size_t>(shape[d]);
    size_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= static_cast<size_t>(shape[k]);
    for (size_t k = d + 1; k < shape.size(); ++k) inner *= static_cast<size_t>(shape[k]);
    next.assign(cur.size(), 0.0);
    const float* q = bases[d].data();
    // For each slab, y[j, :] += x[i, :] * Q[i, j]: the inner rows stay
    // contiguous, so the innermost loop streams.
    for (size_t o = 0; o < outer; ++o) {
      const double* xs = cur.data() + o * n * inner;
      double* ys = next.data() + o * n * inner;
      for (size_t i = 0; i < n; ++i) {
        const double* xrow = xs + i * inner;
        for (size_t j = 0; j < n; ++j) {
          const double qij = q[i * n + j];
          double* yrow = ys + j * inner;
          for (size_t k = 0; k < inner; ++k) yrow[k] += xrow[k] * qij;
        }
      }
    }
    cur.swap(next);
  }
  return std::vector<float>(cur.begin(), cur.end());
}

}  // namespace optstate
