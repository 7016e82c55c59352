// What the fused kernel and its scalar reference both check before a step, so
// that they refuse the same input with the same words. Internal to lib/.
#ifndef OPTSTATE_OPTIM_OPTIMIZER_CHECKS_H_
#define OPTSTATE_OPTIM_OPTIMIZER_CHECKS_H_

#include <span>
#include <vector>

#include "optim/adamw_kernel.h"
#include "optstate/optimizer.h"

namespace optstate {
namespace optim {
StatusOr<ParamType> ParamTypeOf(DType dtype);
}  // namespace optim

// Hyperparameters as torch's constructors bound them, and every tensor
// complete for the algorithm (SGD, Adagrad, RMSprop; Adam(W) check their own).
Status CheckOptimizerTensors(Algorithm a, std::span<const OptimizerTensor> tensors, const OptimizerHyper& h);

// Adam and AdamW run on AdamW's kernel (optimizer.h): the family's tensors and
// hyperparameters as it takes them (state slots in order; Adam's decay coupled).
std::vector<AdamWTensor> AsAdamWTensors(std::span<const OptimizerTensor> tensors);
AdamWHyper AsAdamWHyper(Algorithm a, const OptimizerHyper& h);

}  // namespace optstate

#endif  // OPTSTATE_OPTIM_OPTIMIZER_CHECKS_H_
