// The keys of a torch.optim param group, per algorithm, in the order torch
// 2.6's constructor writes them (after "lr", which every class has first), and
// where each lives in OptimizerHyper: what regenerate writes into a group and
// what a replayed step reads back from one, from one table.
#ifndef OPTSTATE_OPTIM_GROUP_FIELDS_H_
#define OPTSTATE_OPTIM_GROUP_FIELDS_H_

#include <span>
#include <string_view>

#include "optstate/optimizer.h"

namespace optstate {

enum class GroupFieldKind {
  kNumber,  // a float from OptimizerHyper::*number
  kFlag,    // a bool from OptimizerHyper::*flag
  kBetas,   // (beta1, beta2)
  kNone,    // written as None (foreach, fused: torch's "decide for me")
  kFalse,   // written as False (capturable, differentiable: never on here)
};

struct GroupField {
  std::string_view key;
  GroupFieldKind kind;
  double OptimizerHyper::*number = nullptr;
  bool OptimizerHyper::*flag = nullptr;
};

std::span<const GroupField> GroupFields(Algorithm a);

// Every class's table once (Adam and AdamW share one): all the keys a group of
// any algorithm may hold.
std::span<const std::span<const GroupField>> EveryGroupFieldTable();

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_GROUP_FIELDS_H_
