// SOAP's change of basis, for migrating state between HeavyBall versions
// that keep a moment in different spaces (0.x stored SOAP's exp_avg as it
// accumulated the raw gradient; 1.x and later keep it in the eigenbasis).
#ifndef OPTSTATE_STATE_EIGENBASIS_PROJECTION_H_
#define OPTSTATE_STATE_EIGENBASIS_PROJECTION_H_

#include <cstdint>
#include <span>
#include <vector>

namespace optstate {

// One dimension's basis: an n x n row-major matrix whose columns are the
// eigenvectors (HeavyBall's Q), or empty where that dimension has none.
using Basis = std::vector<float>;

// y = x with every dimension d that has a basis contracted against it,
// y[..., j, ...] = sum_i x[..., i, ...] * Q_d[i, j]: HeavyBall's
// project(x, Q, back=False). x is C-ordered with `shape`; bases has one entry
// per dimension, each empty or shape[d]^2 long (the caller checks). Sums run
// in double and are rounded to float32 once at the end, so the result is as
// close to exact as float32 allows (HeavyBall's own einsum rounds per dim).
// O(numel * sum of the basis sizes): a plain scalar loop, which a migration
// run once per checkpoint can afford.
std::vector<float> ProjectIntoEigenbasis(std::span<const float> x, const std::vector<int64_t>& shape,
                                         const std::vector<Basis>& bases);

}  // namespace optstate

#endif  // OPTSTATE_STATE_EIGENBASIS_PROJECTION_H_
