// What torch.save's pickle means: dtypes, storages, tensors and the few Python
// types torch relies on, recognised in an ObjectGraph without running anything.
//
// ResolveTorchObjects rewrites recognised nodes in place (memo sharing is kept,
// since every reference points at the same node):
//   persistent id ('storage', torch.XStorage, key, location, numel[, view])
//                                            -> kStorage   (one per key)
//   torch._utils._rebuild_tensor[_v2|_v3], _rebuild_meta_tensor_no_storage,
//   _rebuild_parameter[_with_state], torch._tensor._rebuild_from_type_v2
//                                            -> kTensor
//   _rebuild_from_type_v2(_rebuild_wrapper_subclass, DTensor, args, state)
//                                            -> kTensor with is_dtensor: the local
//                                               shard from state, the global shape
//                                               from args, placements and mesh
//                                               from the DTensorSpec
//   _rebuild_from_type_v2(_rebuild_wrapper_subclass, ShardedTensor, args, state)
//                                            -> kTensor with is_dtensor and an
//                                               explicit block (FSDP1's sharded
//                                               state dicts): the rank's one local
//                                               shard, its offsets, the global shape
//   collections.OrderedDict(...) + SETITEMS  -> kDict "collections.OrderedDict"
//   torch.Size((...))                        -> kTuple "torch.Size"
//   _codecs.encode(str, 'latin1')            -> kBytes (protocol-2 bytes)
//   builtins.set([...]) / frozenset([...])   -> kSet / kFrozenSet
// Anything else stays a kObject that can still be printed and walked. Tensor
// bytes are located (storage record and offset) but never read here.
#ifndef OPTSTATE_TORCH_OBJECTS_H_
#define OPTSTATE_TORCH_OBJECTS_H_

#include <bitset>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/pickle_graph.h"
#include "optstate/status.h"

namespace optstate {

// Tensor element types as they appear in checkpoints, without LibTorch.
//
// A checkpoint names a dtype in three ways: a legacy storage class
// (`torch.FloatStorage`, zip and legacy formats alike), a dtype global
// (`torch.float32`, in _rebuild_tensor_v3 and DCP metadata), or a Python name
// ("float32" in our JSON). All three map to one DType.
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
  kComplex64,
  kComplex128,
  kQInt8,
  kQUInt8,
  kQInt32,
  // No legacy storage class: saved as UntypedStorage + _rebuild_tensor_v3 (torch >= 2.2).
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat8E4M3FNUZ,
  kFloat8E5M2FNUZ,
  kUInt16,
  kUInt32,
  kUInt64,
  kLast = kUInt64,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;           // torch's str(dtype) without "torch.": "float32"
  std::string_view storage_class;  // legacy class in module `torch`: "FloatStorage"; "" if none
  uint8_t element_size;            // bytes
};

const DTypeInfo& GetDTypeInfo(DType dtype);
std::optional<DType> DTypeFromName(std::string_view name);  // "float32", also "float", "half"
std::optional<DType> DTypeFromStorageClass(std::string_view storage_class);  // "FloatStorage"

struct StorageRef {
  // Compact texts: a key and "cpu" fit in their 8 bytes, and a save of 10^6
  // parameters has 4 * 10^6 storages (48 bytes each; 112 with std::string).
  CompactText key;       // persistent id key: "0", "1", ... (zip) or an address (legacy)
  CompactText location;  // "cpu", "cuda:0", ...
  uint64_t numel = 0;    // elements as declared by the pickle
  uint64_t nbytes = 0;   // numel * element size
  // Where the bytes are: filled by the container layer.
  uint64_t data_offset = 0;  // legacy format: first byte in the checkpoint buffer
  int32_t zip_entry = -1;    // index in the zip directory; its data offset is read lazily
  DType dtype = DType::kUInt8;
  // Bits, so that they share 8 bytes with the two fields above.
  bool untyped : 1 = false;  // torch.storage.UntypedStorage: numel counts bytes
  bool located : 1 = false;
  bool zero_fill : 1 = false;  // made by optstate (remap --on-collision reset): all zero bytes
  bool computed : 1 = false;   // made by optstate (migrate): bytes computed when written
};
static_assert(sizeof(StorageRef) <= 48, "one per storage, 4 * 10^6 in a save of 10^6 parameters");

// How a DTensor (FSDP2, tensor parallel) is split: the whole tensor's sizes
// and this rank's place. Out of line: one tensor in 10^5 checkpoints' 4 * 10^5
// has it.
struct DTensorSplit {
  std::vector<int64_t> global_sizes;
  std::vector<std::string> placements;  // "Shard(dim=0)", "Replicate()", "Partial(sum)"
  std::vector<int64_t> mesh_shape;
  std::vector<int64_t> mesh_coordinate;  // this rank's, as its DeviceMesh pickled it; empty if not
  // FSDP1's ShardedTensor says where its shard lies outright (ShardMetadata's
  // offsets) instead of by placements on a mesh; mesh_shape is then
  // [world size] and mesh_coordinate [rank], from its ProcessGroupState.
  bool explicit_block = false;
  bool holds_no_block = false;          // this rank holds none of it (a tensor of fewer rows than ranks)
  std::vector<int64_t> block_offsets;
};

// A tensor's sizes or strides: up to two dimensions (a weight, a bias, a
// scalar) held in the value itself. As std::vectors they were a 32-byte malloc
// block each, 190 MB beside the graph at 10^6 [16, 8] parameters with AdamW.
using TensorDims = CompactList<int64_t, 16>;

struct TensorRef {
  uint64_t storage_offset = 0;  // in elements
  TensorDims sizes;
  TensorDims strides;
  // The index, dtype and flags share 8 bytes: 72 bytes a tensor, not 88.
  int32_t storage = -1;  // index into storages (at most one a graph node); -1 for meta tensors
  DType dtype = DType::kFloat32;
  bool requires_grad : 1 = false;
  bool is_parameter : 1 = false;
  // DTensor (FSDP2, tensor parallel): the fields above describe this rank's local
  // shard; these describe the whole tensor and how it is split (empty unless
  // is_dtensor). Written through layout().
  bool is_dtensor : 1 = false;
  bool inside_dtensor : 1 = false;  // this is the _local_tensor of a DTensor listed separately
  const std::vector<int64_t>& global_sizes() const { return layout_ ? layout_->global_sizes : kNoInts; }
  // The whole tensor's sizes: a DTensor's global sizes, else `sizes`.
  std::vector<int64_t> whole_sizes() const { return is_dtensor ? global_sizes() : sizes.ToVector(); }
  const std::vector<std::string>& placements() const { return layout_ ? layout_->placements : kNoTexts; }
  const std::vector<int64_t>& mesh_shape() const { return layout_ ? layout_->mesh_shape : kNoInts; }
  const std::vector<int64_t>& mesh_coordinate() const { return layout_ ? layout_->mesh_coordinate : kNoInts; }
  bool explicit_block() const { return layout_ && layout_->explicit_block; }
  bool holds_no_block() const { return layout_ && layout_->holds_no_block; }
  const std::vector<int64_t>& block_offsets() const { return layout_ ? layout_->block_offsets : kNoInts; }
  // "DTensor" or "ShardedTensor", for reports.
  const char* sharded_kind() const { return explicit_block() ? "ShardedTensor" : "DTensor"; }
  DTensorSplit& layout() { return layout_.GetOrCreate(); }
  uint64_t numel() const;
  uint64_t nbytes() const;

 private:
  static inline const std::vector<int64_t> kNoInts;
  static inline const std::vector<std::string> kNoTexts;
  OutOfLine<DTensorSplit> layout_;
};

static_assert(sizeof(TensorRef) <= 72, "one per tensor: 4 * 10^6 of them in a checkpoint of 10^6 parameters");

// Called once per storage key when first met; fills zip_entry/data_offset/located
// from the container, or fails (missing record, record shorter than nbytes).
using StorageLocator = std::function<Status(StorageRef&)>;

struct TorchObjects {
  std::vector<StorageRef> storages;
  std::vector<TensorRef> tensors;
};

// Resolves the graph in place. Errors name the node's byte offset: a tensor
// whose view reaches past its storage, a malformed storage id, an unknown dtype.
StatusOr<TorchObjects> ResolveTorchObjects(ObjectGraph& graph, const StorageLocator& locate,
                                           uint32_t max_depth);

// Once the security scans have read every call: a plain tensor's node drops
// the call that built it (it is written back from its TensorRef), and the
// nodes the root no longer reaches (those calls' arguments, storage
// references and hooks; objects left beneath the root at STOP) are freed, the
// graph compacted and renumbered (CompactGraph): 29 nodes a parameter become
// ~9 at 10^5 parameters. Returns the nodes kept.
size_t ReleaseTensorCalls(ObjectGraph& graph, const std::vector<TensorRef>& tensors);

// Gives each tensor's node its short identity for reports, e.g. HeavyBall's
// (Parameter, view_idx) key reads "(Parameter(float32 [16, 8], storage 0), 0)".
// After ReleaseTensorCalls, not while the tensors are made: a label is ~48
// bytes of heap a tensor (190 MB at 10^6 parameters), and made beside the
// whole graph it added to the read's peak; once the calls are freed there is
// room.
void LabelTensors(ObjectGraph& graph, const std::vector<TensorRef>& tensors, const std::vector<StorageRef>& storages);

// Is module.name on torch 2.6's default weights_only allowlist? (Python 2 names
// such as __builtin__.set are mapped first, as torch does.)
bool IsWeightsOnlyAllowed(std::string_view module, std::string_view name);

// The opcodes among `used` that torch 2.6's weights_only unpickler refuses
// ("Unsupported operand"), named as "FRAME 0x95": protocol 4 and 5 pickles
// use FRAME, SHORT_BINUNICODE, MEMOIZE; text and bytes opcodes are refused too.
std::vector<std::string> OpcodesWeightsOnlyRefuses(const std::bitset<256>& used);

// The DTensor classes (DTensor, DeviceMesh, DTensorSpec, TensorMeta, Shard,
// Replicate, Partial) that torch 2.6 adds to that allowlist when
// torch.distributed.tensor is imported: FSDP2 files load with
// weights_only=True only after that import.
bool IsAllowedOnceDistributedTensorImported(std::string_view module, std::string_view name);

// Python 2 module names in pickles mapped as pickle's compat tables do
// (__builtin__ -> builtins, copy_reg -> copyreg, cPickle -> pickle, urllib2 ->
// urllib.request, commands -> subprocess, ...).
std::string_view NormalizeModule(std::string_view module);

// "[16, 8]"; "[]" for a 0-d tensor.
std::string ShapeText(std::span<const int64_t> sizes);

// The number of elements of a shape: the product of its sizes (1 for 0-d).
uint64_t ShapeNumel(std::span<const int64_t> sizes);

// Globals that execute code or reach the system when called: os.*, subprocess.*,
// builtins.eval/exec/..., runpy, importlib, operator.attrgetter, torch.load, ...
// (the union of picklescan's, modelscan's and fickling's lists), after Python 2
// names are mapped, and matched along dotted names (pathlib.os.system).
bool IsDangerousGlobal(std::string_view module, std::string_view name);

// Modules whose import alone runs code beyond defining names: a package's
// __main__ (and the running script's own __main__, whose globals are user
// code), `this` (prints), `antigravity` (opens a browser), idlelib.idle
// (starts IDLE). Resolving any global of theirs, even one only named, does it.
bool ImportRunsCode(std::string_view module);

// Classes healthy checkpoints call when loaded with weights_only=False that
// build data and nothing else (numpy reconstruction, containers, dates, paths,
// BytesIO, DeepSpeed's and FSDP2 + TP's saved objects): warnings, not errors.
bool IsKnownDataClass(std::string_view module, std::string_view name);

// "_StridedShard(dim=0, sf=2), Shard(dim=0)": a DTensor's placements for
// reports, one per mesh dim; "" for none.
std::string PlacementsText(const std::vector<std::string>& placements);

}  // namespace optstate

#endif  // OPTSTATE_TORCH_OBJECTS_H_
