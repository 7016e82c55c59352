// What `optstate inspect` shows, gathered as plain data: container facts, the
// object tree (tensors summarised, never read except 0-d step values), every
// optimizer state dict found in it, and the security findings. tools/ renders it.
#ifndef OPTSTATE_INSPECT_REPORT_H_
#define OPTSTATE_INSPECT_REPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optstate/checkpoint.h"

namespace optstate {

struct TreeLine {
  std::string path;      // "" for the root
  std::string label;     // the key or [index] as shown: "exp_avg", "[0]", "(1, (16, 8))"
  uint32_t depth = 0;
  std::string type;      // "dict", "tensor", "int", ...
  std::string summary;   // "9 entries", "float32 [16, 8] 512 B", "0.001"
  std::string same_as;   // for an object already shown: its first path
  size_t more = 0;       // > 0: a line standing for this many further siblings
  bool last = false;     // last shown child of its parent (for tree drawing)
};

struct StateField {
  std::string name;         // "exp_avg"
  size_t count = 0;         // entries that have it
  std::vector<std::string> dtypes;  // distinct, "float32"; or Python types for non-tensors
  uint64_t bytes = 0;       // tensor data
  size_t scalars = 0;       // 0-d tensors or plain numbers
};

struct GroupSummary {
  size_t params = 0;
  std::vector<std::pair<std::string, std::string>> hyperparameters;  // name, value text
};

struct OptimizerSummary {
  std::string path;                 // where in the tree ("" = the root)
  size_t state_entries = 0;
  std::vector<std::pair<std::string, size_t>> key_types;  // "int" -> 9, "(int, tuple[int])" -> 17
  bool nested_views = false;        // HeavyBall 2.x/3.x {index: {view: {...}}}
  std::vector<StateField> fields;
  std::vector<std::string> step_values;  // distinct values of step fields, at most 8
  size_t steps_read = 0;            // 0-d step tensors read for step_values
  size_t steps_total = 0;           // step fields that are 0-d tensors
  std::vector<GroupSummary> groups;
  size_t group_params = 0;          // params listed across param_groups
};

struct InspectReport {
  uint64_t tensors = 0;
  uint64_t tensor_bytes = 0;        // sum over tensors (views counted in full)
  uint64_t storage_bytes = 0;       // sum over distinct storages
  std::string root_path;            // --path
  std::vector<TreeLine> tree;
  std::vector<OptimizerSummary> optimizers;
};

struct InspectReportOptions {
  // Each 0-d step tensor is its own record: reading all of them costs one disk
  // seek each on a cold cache, so inspect samples; validate reads them all.
  size_t max_step_reads = 32;
  uint32_t depth = 3;       // tree levels below the root shown
  size_t max_items = 12;    // children shown per container before "... N more"
  std::string path;         // show the tree from here
};

// kNotFound when options.path names nothing.
StatusOr<InspectReport> BuildInspectReport(const CheckpointFile& file, const InspectReportOptions& options);

// The same for a graph whose tensors live elsewhere (a DCP checkpoint): `read`
// gives a tensor's elements in C order (used for 0-d step values only).
using TensorBytesReader = std::function<StatusOr<std::vector<std::byte>>(const TensorRef&)>;
StatusOr<InspectReport> BuildInspectReport(const Checkpoint& checkpoint, const TensorBytesReader& read,
                                           const InspectReportOptions& options);

// "512 B", "1.2 KiB", "3.4 GiB".
std::string HumanBytes(uint64_t bytes);

}  // namespace optstate

#endif  // OPTSTATE_INSPECT_REPORT_H_
