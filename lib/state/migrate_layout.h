// The pieces of `optstate migrate` that depend on the legacy optimizer:
// which family a file's state belongs to, and the param_groups and top-level
// `heavyball` entry HeavyBall 3.2 saves for it (state_migrate.cc builds the
// state entries and calls these).
#ifndef OPTSTATE_STATE_MIGRATE_LAYOUT_H_
#define OPTSTATE_STATE_MIGRATE_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "optstate/params.h"
#include "optstate/state_migrate.h"
#include "torch/graph_builder.h"

namespace optstate {

enum class LegacyFamily {
  kAdamW0,  // 0.x ForeachAdamW: exp_avg, exp_avg_sq; the group's counter k
  kAdamW1,  // 1.x ForeachAdamW: update_by_adam_exp_avg(_sq); step in the entries
  kSoap0,   // 0.x ForeachSOAP: step, exp_avg (unprojected), exp_avg_sq, Q, GG per entry
  kSoap1,   // 1.x ForeachSOAP: scale_by_soap_exp_avg(_sq) (projected), Q, GG; step in the first entry
  kAdamW2,  // 2.x ForeachAdamW: {0: {update_by_adam_exp_avg_0, ...}}, 3.x's names already
  kSoap2,   // 2.x ForeachSOAP: {0: {scale_by_soap_exp_avg_0, ..._Q_1, ...}}, no batch dimension
};

// HeavyBall 3.2's state field names: transform, field, the transform's index
// in the chain. AdamW's chain is one transform (update_by_adam, 0); SOAP keeps
// the moments in transform 2 and the preconditioner in 3.
namespace hb3 {
inline constexpr const char* kAdamExpAvg = "update_by_adam_exp_avg_0";
inline constexpr const char* kAdamExpAvgSq = "update_by_adam_exp_avg_sq_0";
inline constexpr const char* kSoapExpAvg = "scale_by_soap_exp_avg_2";
inline constexpr const char* kSoapExpAvgSq = "scale_by_soap_exp_avg_sq_2";
inline constexpr const char* kSoapQ = "scale_by_soap_Q_3";
inline constexpr const char* kSoapGG = "scale_by_soap_GG_3";
}  // namespace hb3

// A legacy state field and what HeavyBall 3.2 calls it.
struct FieldName {
  const char* legacy;
  const char* heavyball3;
};

// A legacy group field and a word about it: why leaving it out is safe, or the
// algorithm it marks.
struct FieldNote {
  const char* field;
  const char* note;
};

// Makes the tensors of the migrated layout in `r.checkpoint` (migrate_tensors.cc).
// Views keep pointing into the input's bytes; computed storages are listed in
// r.computed for WriteMigrated. Errors name `where`.
class MigrateTensors {
 public:
  explicit MigrateTensors(MigrateResult& r) : r_(r) {}
  // A tensor whose storage is computed when written (its plan: r.computed.back()).
  NodeId ComputedTensor(GraphBuilder& b, DType dtype, const std::vector<int64_t>& shape);
  // The float32 whole tensor at `id`, or an error naming `where`.
  StatusOr<const TensorRef*> Float32Tensor(NodeId id, const std::string& where);
  // The tensor (or None) at `id` with 3.x's leading batch dimension, same bytes.
  StatusOr<NodeId> Batched(GraphBuilder& b, NodeId id, const std::string& where);
  // One SOAP view from a 2.x view dict `fields` into `d`, renamed by `names`.
  Status Soap2View(GraphBuilder& b, NodeId fields, NodeId d, const std::string& where,
                   std::span<const FieldName> names);
  // One SOAP view from a 0.x or 1.x entry: names[0] / names[1] are its moments;
  // `rotate` projects the first into Q's eigenbasis (0.x kept it unprojected).
  Status SoapView(GraphBuilder& b, NodeId fields, NodeId d, const std::string& where,
                  std::span<const FieldName> names, bool rotate);

 private:
  MigrateResult& r_;
};

inline bool IsSoap(LegacyFamily f) {
  return f == LegacyFamily::kSoap0 || f == LegacyFamily::kSoap1 || f == LegacyFamily::kSoap2;
}

// 3.x's precondition schedule as the migrated file carries it: the
// probability per step HeavyBall 3.x pickles as `precond_schedule` (1/f for a
// fixed frequency f), and where its accumulator stands.
struct PreconditionSchedule {
  bool known = false;          // else 3.x keeps its constructor's
  double probability = 0;
  int64_t prob_step = 0;       // inner_group's cumulative_prob_prob_step
  double cumulative = 0;       // inner_group's cumulative_prob
  std::string note;            // where it came from
};

// Replaces every group of the optimizer state dict at `state_node` in `g` by
// the group HeavyBall 3.2's optimizer of `family` saves: the old group's
// values where it has the field, 3.2's defaults otherwise, `params` as the
// remap numbered them; adds what a user should know to `notes`.
void RewriteGroupsAs3x(LegacyFamily family, const OptimizerState& st, const std::vector<ParamInfo>& params,
                       NodeId state_node, GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes);

// Adds the top-level `heavyball` entry 3.2's StatefulOptimizer saves: for
// SOAP with `schedule` (pickled as 3.x pickles a float), for AdamW with a
// pickled None (it never preconditions), as 3.2.0 itself writes them.
void AddHeavyballEntry(LegacyFamily family, NodeId state_node, const PreconditionSchedule& schedule,
                       GraphBuilder& b, ObjectGraph& g, std::vector<std::string>& notes);

// The text of a str node; "" for no node or another kind.
inline std::string StrValue(const ObjectGraph& g, NodeId id) {
  return id != kNoNode && g.at(id).kind == NodeKind::kStr ? g.at(id).text.str() : std::string();
}

// The float (or None) in a pickle of nothing else, as HeavyBall 2.x/3.x store
// precond_schedule; nullopt for any other pickle, which is never carried over
// (3.x unpickles it on load, so it would run whatever it references).
std::optional<std::optional<double>> PickledNumber(const std::string& bytes);

}  // namespace optstate

#endif  // OPTSTATE_STATE_MIGRATE_LAYOUT_H_
