// Which torch.optim algorithm an optimizer state dict was saved by, from its
// state fields and group hyperparameters, and what each of its state fields is
// (one value per parameter element, a scalar, a factored row or column, a flat
// vector over all parameters, a list). Rules check a field only as what it is:
// validate's state-shape-mismatch and verify's shape check ask LayoutOfField,
// and verify replays what it knows, reporting the rest as "not replayed".
//
// The table was read off the enumerated corpus (testdata/enumerated/, every
// public torch.optim class of torch 1.13 and 2.6 over its flags), not written
// from memory: a class torch adds later is "unknown" until the corpus holds it.
#ifndef OPTSTATE_STATE_OPTIMIZER_FAMILY_H_
#define OPTSTATE_STATE_OPTIMIZER_FAMILY_H_

#include <string>
#include <string_view>

#include "optstate/params.h"

namespace optstate {

enum class FieldLayout {
  kPerElement,    // the parameter's shape: exp_avg, momentum_buffer, sum, ...
  kScalar,        // step, ASGD's eta and mu, NAdam's mu_product, LBFGS's H_diag
  kFactoredRow,   // Adafactor's row_var: the parameter's shape with the last dimension 1
  kFactoredCol,   // Adafactor's col_var: the parameter's shape with the second-to-last dimension 1
  kFlatOverAll,   // LBFGS's d and prev_flat_grad: every parameter flattened into one vector
  kNotATensor,    // lists and numbers (LBFGS's old_dirs, n_iter, prev_loss)
  kUnknown,       // the algorithm, or this field of it, is not one optstate knows
};

struct OptimizerFamily {
  // "adam" / "adamw" (when the file tells: torch 1.13's AdamW groups lack
  // `fused`, its Adam's have it), "adam-or-adamw" (same fields: torch 2.x),
  // "heavyball3-adamw", "sgd", "adagrad", "rmsprop" (the ones verify replays);
  // "nadam", "radam", "adamax", "adadelta", "asgd", "rprop", "sparseadam",
  // "adafactor", "lbfgs" (known, not replayed); "unknown".
  std::string name;
  std::string evidence;  // what decided it, for the report
  bool known() const { return name != "unknown"; }
};

OptimizerFamily RecogniseOptimizer(const Checkpoint& checkpoint, const OptimizerState& state);

// What `field` of a state saved by `family` holds. kUnknown for an unknown
// family or a field its table does not list: rules then say they did not check it.
FieldLayout LayoutOfField(std::string_view family, std::string_view field);

// LBFGS keeps one state entry (the first parameter's) for the whole optimizer.
bool KeepsOneEntryForAllParams(std::string_view family);

// Adagrad creates state for every parameter when it is constructed: a step of
// 0 there means "never stepped" (frozen or unused), not a state out of step.
bool CreatesStateUpFront(std::string_view family);

}  // namespace optstate

#endif  // OPTSTATE_STATE_OPTIMIZER_FAMILY_H_
