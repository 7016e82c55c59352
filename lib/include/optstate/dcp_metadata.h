// The `.metadata` file of a torch.distributed.checkpoint (DCP) directory.
//
// It is a plain pickle (protocol 4 on Python 3.8-3.13) of dataclasses:
// Metadata(state_dict_metadata, planner_data, storage_data, storage_meta[,
// version]). ParseDcpMetadata runs it through our pickle reader (nothing is
// imported or called), refuses any global that is not one of DCP's own classes
// or the few torch/pathlib helpers they use, and turns the graph into plain
// structs: one DcpEntry per flat key, with the key's path from planner_data
// (never by splitting the key on dots: FQNs contain dots), its global shape and
// chunks for tensors, and where each chunk's bytes are (file, offset, length).
//
// The layout is checked here, without touching the data files: chunk boxes
// inside the global shape, no two chunks overlapping, chunk volumes adding up
// to the whole tensor (so they tile it), every chunk and bytes item with a
// storage location, and relative paths that stay inside the directory.
#ifndef OPTSTATE_DCP_METADATA_H_
#define OPTSTATE_DCP_METADATA_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "optstate/file_io.h"
#include "optstate/pickle_graph.h"
#include "optstate/status.h"
#include "optstate/torch_objects.h"

namespace optstate {

// Where an item's bytes are: a complete torch.save zip at [offset, offset + length)
// of `relative_path` (relative to the checkpoint directory).
struct DcpLocation {
  std::string relative_path;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct DcpChunk {
  std::vector<int64_t> offsets;  // the chunk's box within the global tensor
  std::vector<int64_t> sizes;
  DcpLocation where;
  uint64_t numel() const;
};

// One element of an entry's path: a mapping key (always a str in DCP) or a list index.
struct DcpPathPart {
  bool is_index = false;
  std::string key;
  int64_t index = 0;
};

struct DcpEntry {
  std::string fqn;                // the flat key, e.g. "optim.state.fc1.weight.exp_avg"
  std::vector<DcpPathPart> path;  // ("optim", "state", "fc1.weight", "exp_avg")
  bool is_tensor = false;
  // Tensors.
  DType dtype = DType::kFloat32;
  std::vector<int64_t> size;      // global shape
  std::vector<DcpChunk> chunks;   // in the order .metadata lists them
  bool requires_grad = false;
  // Bytes items (any non-tensor value, itself a torch.save of that value).
  DcpLocation bytes_where;
  uint64_t numel() const;         // tensors: of the global shape
  // Every chunk spans all of dims 1..n (FSDP2's dim-0 shards, 0-d values), so
  // in C order the chunks are consecutive byte ranges of the tensor.
  bool HoldsWholeRows() const;
  // Bytes of one row of dim 0 (all of a 0-d tensor): what rows [b, e) of it take.
  uint64_t RowBytes() const;
};

struct DcpMetadata {
  int pickle_protocol = 0;
  std::vector<GlobalRef> globals;  // every one of them a DCP class or helper (else parsing fails)
  std::vector<DcpEntry> entries;  // in state_dict_metadata order (torch rebuilds in this order)
  bool has_planner_data = false;  // false: every path is the flat key alone
  std::string checkpoint_id;      // StorageMeta, when present (informational)
  std::string save_id;
  std::string version;            // Metadata.version (after torch 2.6), "" when absent
};

struct DcpMetadataLimits {
  PickleLimits pickle;
  uint64_t max_entries = 1u << 22;
  uint64_t max_chunks_per_tensor = 1u << 16;
  uint32_t max_dims = 64;
  // Refuse chunks that overlap, leave gaps or reach outside their tensor. Off
  // only for `validate`, which reports them (CheckDcpChunkLayout) instead.
  bool check_layout = true;
};

// Parses and checks `bytes` (the .metadata file). Errors name the pickle
// offset of the offending object, and the flat key where one is involved.
StatusOr<DcpMetadata> ParseDcpMetadata(ByteSpan bytes, const DcpMetadataLimits& limits = {});

// Chunks inside the tensor, not overlapping, covering it; the error names the
// chunk (ParseDcpMetadata runs this on every tensor unless told not to).
Status CheckDcpChunkLayout(const DcpEntry& entry);

// The .metadata pickle for `entries` (with their chunks and locations), as
// torch 2.6's pickle.load rebuilds DCP's Metadata from it (dcp_metadata_writer.cc).
StatusOr<std::string> WriteDcpMetadata(const std::vector<DcpEntry>& entries);
// The same bytes handed to `sink` a piece (about a megabyte) at a time as they
// are made (a .metadata of 320 k chunks is ~30 MB); returns how many.
StatusOr<uint64_t> WriteDcpMetadata(const std::vector<DcpEntry>& entries,
                                    const std::function<Status(std::string_view)>& sink);

// "optim.state.fc1.weight.exp_avg" -> the path as "optim/state/fc1.weight/exp_avg"
// for display; list indices print as numbers.
std::string DcpPathText(const std::vector<DcpPathPart>& path);

}  // namespace optstate

#endif  // OPTSTATE_DCP_METADATA_H_
