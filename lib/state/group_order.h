// Which model parameter each optimizer index is, when param_groups holds
// indices only and the model has several groups or frozen parameters.
//
// torch.optim numbers parameters group by group, each group in the order it
// was given. Training stacks build groups by filtering model.parameters()
// (the weight-decay split of HF Trainer and timm, torchvision's norm group,
// requires_grad for fine-tuning), so each group is a subsequence of module
// order, the groups are disjoint, and parameters no group lists are frozen.
// An assignment fits when it keeps that shape and every index's state shape
// equals its parameter's. This finds whether exactly one fits.
#ifndef OPTSTATE_STATE_GROUP_ORDER_H_
#define OPTSTATE_STATE_GROUP_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace optstate {

struct GroupOrderInput {
  std::vector<std::vector<int64_t>> candidate_shapes;  // the model's parameters, module order
  std::vector<size_t> group_sizes;                     // param_groups order; indices run group by group
  // Per index: its state's shape, or nullopt when the state does not say
  // (no entry, or no tensor), which any parameter fits.
  std::vector<std::optional<std::vector<int64_t>>> index_shapes;
};

struct GroupOrder {
  size_t fits = 0;                  // 0, 1, or 2 meaning two or more
  bool gave_up = false;             // the search passed its state budget: undecided
  std::vector<size_t> candidate_of; // fits == 1: each index's candidate
  // fits >= 2: the candidates that some fitting assignment places differently
  // than another (frozen in one, trained in another, or at another index).
  std::vector<size_t> ambiguous;
};

// A dynamic program over (candidate, position reached in each group), forward
// counting fits (capped at 2), backward keeping the states that complete.
// `max_states` bounds the states held; past it the result is gave_up.
GroupOrder AssignInGroupOrder(const GroupOrderInput& input, size_t max_states = 2'000'000);

}  // namespace optstate

#endif  // OPTSTATE_STATE_GROUP_ORDER_H_
