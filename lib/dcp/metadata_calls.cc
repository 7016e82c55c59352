// What a DCP .metadata pickle may name and call, checked before its graph is read.
#include "dcp/metadata_calls.h"

#include <set>
#include <string>
#include <utility>

#include "optstate/torch_objects.h"

namespace optstate {
namespace {

std::string At(const Node& n) { return "offset " + std::to_string(n.offset) + ": "; }

}  // namespace

// The globals a DCP .metadata may name. Anything else (os.system, a class of
// some other library) means the file is not what it claims and is refused
// before its graph is looked at.
bool IsMetadataGlobal(std::string_view module, std::string_view name) {
  static const std::set<std::pair<std::string_view, std::string_view>> kAllowed = {
      {"torch.distributed.checkpoint.metadata", "Metadata"},
      {"torch.distributed.checkpoint.metadata", "TensorStorageMetadata"},
      {"torch.distributed.checkpoint.metadata", "BytesStorageMetadata"},
      {"torch.distributed.checkpoint.metadata", "ChunkStorageMetadata"},
      {"torch.distributed.checkpoint.metadata", "TensorProperties"},
      {"torch.distributed.checkpoint.metadata", "MetadataIndex"},
      {"torch.distributed.checkpoint.metadata", "StorageMeta"},
      {"torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"},
      {"torch.distributed._shard.sharded_tensor.metadata", "TensorProperties"},
      {"torch.distributed._shard.sharded_tensor.metadata", "MEM_FORMAT_ENCODING"},
      {"torch.distributed.checkpoint.filesystem", "_StorageInfo"},
      {"torch.distributed._shard.checkpoint.metadata", "Metadata"},
      {"torch.distributed._shard.checkpoint.metadata", "TensorStorageMetadata"},
      {"torch.distributed._shard.checkpoint.metadata", "BytesStorageMetadata"},
      {"torch.distributed._shard.checkpoint.metadata", "ChunkStorageMetadata"},
      {"torch.distributed._shard.checkpoint.metadata", "MetadataIndex"},
      {"torch.distributed._shard.checkpoint.filesystem", "_StorageInfo"},
      {"torch.serialization", "_get_layout"},
      {"torch", "Size"},
      {"pathlib", "PosixPath"},
      {"pathlib._local", "PosixPath"},
      {"pathlib", "WindowsPath"},
      {"pathlib._local", "WindowsPath"},
      {"builtins", "getattr"},  // enum members on Python >= 3.11
      {"collections", "OrderedDict"},
  };
  if (kAllowed.count({module, name})) return true;
  return module == "torch" && DTypeFromName(name).has_value();  // torch.float32, ...
}

// torch reads .metadata with plain pickle.load, so allowed names are not
// enough: getattr(PosixPath(p), "write_text")(text) uses only allowed names and
// writes a file. What DCP's own pickles do is narrower, and only that passes:
// every call is of a global, getattr only fetches a member of one of the
// memory-format enums by a string name, and no global is changed in place.
Status CheckMetadataCalls(const ObjectGraph& g) {
  for (const Node& n : g.nodes) {
    if (n.kind == NodeKind::kGlobal && (n.state() != kNoNode || !n.entries.empty() || !n.items.empty())) {
      return UnsupportedError(At(n) + "the pickle changes the global " + GlobalName(n) +
                              " in place, which no DCP .metadata does; refused without loading");
    }
    if (n.kind != NodeKind::kObject || n.callable() == kNoNode) continue;
    const Node& callee = g.at(n.callable());
    if (callee.kind != NodeKind::kGlobal) {
      return UnsupportedError(At(n) + "the pickle calls what another call returned (a " +
                              TypeName(g, n.callable()) + "), which no DCP .metadata does; refused without loading");
    }
    if (callee.name() != "getattr") continue;
    const bool enum_member = n.args() != kNoNode && g.at(n.args()).kind == NodeKind::kTuple &&
                             g.at(n.args()).items.size() == 2 &&
                             g.at(g.at(n.args()).items[0]).kind == NodeKind::kGlobal &&
                             g.at(g.at(n.args()).items[0]).name().ends_with("MEM_FORMAT_ENCODING") &&
                             g.at(g.at(n.args()).items[1]).kind == NodeKind::kStr;
    if (!enum_member) {
      return UnsupportedError(At(n) + "getattr on something other than a memory-format enum member, which no DCP "
                              ".metadata does; refused without loading");
    }
  }
  return Status();
}

}  // namespace optstate
