// The order HeavyBall gives the views of a parameter it split (SOAP's and
// PSGD's `split=True`): 0.x keyed each view by its own (data_ptr, shape), and
// 2.x/3.x number them, in the order its dim_merger's splits produce them,
// which is not address order: the last dimension is split first, so the
// blocks of a [96, 64] parameter split by 32 come column block by column
// block (offsets 0, 2048, 4096, 32, 2080, 4128 elements).
#ifndef OPTSTATE_STATE_SPLIT_VIEWS_H_
#define OPTSTATE_STATE_SPLIT_VIEWS_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace optstate {

// HeavyBall 3.x's dim_merger: trailing dimensions merged while their product
// stays within `max_dim`; the first is never merged.
std::vector<int64_t> HeavyBallMergedShape(const std::vector<int64_t>& shape, int64_t max_dim);

struct ViewPlacement {
  uint64_t offset = 0;          // first element, counted from the parameter's first
  std::vector<int64_t> shape;   // the view's (from its key)
};

// The views' positions (indices into `views`) in HeavyBall's order, or
// nullopt when they are not blocks of the parameter's merged shape (then the
// caller keeps address order). max_dim is taken as the largest view
// dimension: a dimension that was split has a first block of exactly
// max_precond_dim, and with nothing split there is one view and no order.
std::optional<std::vector<size_t>> HeavyBallSplitOrder(const std::vector<int64_t>& param_shape,
                                                       const std::vector<ViewPlacement>& views);

}  // namespace optstate

#endif  // OPTSTATE_STATE_SPLIT_VIEWS_H_
